// Package controllers holds the operator: the ShellPool and ShellJob
// reconcilers, the placement of queued jobs and the Runnable that keeps one
// agent events stream per worker pod. It does the I/O only: the decisions
// are pure functions elsewhere. Only cmd/manager imports it.
//
// Where each part lives:
//   - shellpool_controller.go: a pool's workers and status.
//   - shelljob_controller.go: a job's pass (fetch, one deferred status
//     patch, the metrics of its milestones) and the watches that feed
//     the queues; then one file per phase: shelljob_start.go (queued: the
//     placement's decision recorded; assigned: the command started),
//     shelljob_approval.go (a job of a pool that requires approval waits
//     for it, and ends without running when denied or expired),
//     shelljob_stop.go (running: a stop or a timeout escalates signals;
//     a queued job stopped never runs) and shelljob_end.go (the exit, a
//     lost worker, the hold's timeout, the TTL).
//   - placement.go: the placement, a manager Runnable as Kueue's scheduler
//     is. The job reconciler and its watch put the jobs that wait for a
//     worker in their pool's queue (scheduler.Queues) and record the
//     decision; the placement takes the pools whose queue has news, asks
//     scheduler.Schedule where their jobs go, and assumes each placement
//     (assumed.go) until the cache shows it.
//   - jobmemory.go: what the operator remembers of an unfinished job
//     beyond its status (its number, Starts, signals, the agent's
//     reports), forgotten in one place.
//   - streams.go: the agents' events streams; numbers.go: the job
//     numbers; workerpod.go, workerstates.go: the worker pods and what
//     their agents say of themselves.
//
// The rules the reconcilers apply are in internal/scheduler (where a job
// goes: FIFO per pool, the modes, the preferred worker, the revisions, a
// full spool, a user's fair share, an approval awaited) and
// internal/shelljob (a job's timeout, its approval, how an exit or a
// worker's end ends it, the status helpers).
//
// The operator is namespaced: it watches the namespace it runs in, and its
// RBAC is a Role there, never cluster-wide. The RBAC markers sit above each
// reconciler's Reconcile.
//
// Who writes what: the operator owns every ShellJob's status, its
// finalizer, the worker pods and the job counter ConfigMap; clients create
// jobs and may set only spec.stop, spec.stopReason, spec.stopBy, spec.hold
// and spec.approval, which the chart's admission policies check against
// the caller's rights on the job's pool. A stop for a timeout is therefore
// recorded in status.stopReason, never in spec. The operator trusts what
// the API server admitted: it names spec.stopBy and spec.approval.by in
// its Events as they are.
package controllers
