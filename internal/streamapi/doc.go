// Package streamapi is the stream.shelljob.dev API: the log, files and
// attach subresources of a ShellJob, served by the operator through the
// API server's aggregation layer, so that reading a job's output, moving
// its files and attaching to a console go through the API server's
// authentication, RBAC and audit log, and only the operator execs into
// the workers.
//
// It is built on k8s.io/apiserver's generic server with delegated
// authentication and authorization. Each subresource is served under two
// resources that address the same ShellJob: shelljobs, any job of the
// namespace, as RBAC allows (get on shelljobs/log reads every job's
// output); and myshelljobs, the caller's own, which RBAC lets through
// (get on myshelljobs/log) and the owner rule then allows only to the
// job's owner (shelljob.KubernetesUser) while they may create ShellJobs
// in its namespace (owner.go). The API server authorizes each request by
// RBAC on its resource before it proxies it here, so no rule of this
// server can widen what RBAC allows: a user's own jobs need a resource of
// their own.
//
// Each subresource is one small rest.Connecter (LogREST, FilesREST,
// AttachREST), which finds the job through the operator's cache and
// reaches the agent of its worker through the operator's agent client,
// over its warm control channels.
package streamapi
