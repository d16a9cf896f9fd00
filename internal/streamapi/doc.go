// Package streamapi is the stream.shelljob.dev API: the log, files and
// attach subresources of a ShellJob, served by the operator through the
// API server's aggregation layer, so that reading a job's output, moving
// its files and attaching to a console go through the API server's
// authentication, RBAC and audit log, and only the operator execs into
// the workers.
//
// It is built on k8s.io/apiserver's generic server with delegated
// authentication and authorization. A request's caller is allowed when
// they own the job (a job from the CLI, or one the bot created from
// Telegram as its sender's identity, whose spec.origin.user they are, while
// they may still create ShellJobs in its namespace), or when the
// API server allows the request itself (get on shelljobs/log, say).
//
// Each subresource is one small rest.Connecter (LogREST, FilesREST,
// AttachREST), which finds the job through the operator's cache and
// reaches the agent of its worker through the operator's agent client,
// over its warm control channels.
package streamapi
