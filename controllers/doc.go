// Package controllers holds the ShellPool and ShellJob reconcilers of the
// operator, and the Runnable that keeps one agent events stream per worker
// pod. It does the I/O only: placement decisions live in internal/scheduler
// and status helpers in internal/shelljob. Only cmd/manager imports it.
//
// The operator is namespaced: it watches the namespace it runs in, and its
// RBAC is a Role there, never cluster-wide. The RBAC markers sit above each
// reconciler's Reconcile.
//
// Who writes what: the operator owns every ShellJob's status, its
// finalizer, the worker pods and the job counter ConfigMap; clients create
// jobs and may set only spec.stop, spec.stopReason and spec.hold. A stop
// for a timeout is therefore recorded in status.stopReason, never in spec.
package controllers
