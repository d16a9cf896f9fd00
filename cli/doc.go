// Package cli is kubectl-shelljob, the kubectl plugin that gives terminal
// users the jobs that the Telegram bot gives chat admins: exec, repl,
// console, logs, ls, stop, approve, deny, pools and render.
//
// [NewCmd] builds the root command from [Options]; each subcommand lives in
// a file of its own, with options that Complete reads from the command line
// and Run carries out. The commands reach the cluster through a [Cluster]
// made from kubectl's own flags (k8s.io/cli-runtime), so that tests can
// give fakes. Jobs are created as ShellJobs and followed through their
// status; their output, files and consoles go through the [Stream], the
// stream API's client (internal/streamclient): the log, files and attach
// subresources of ShellJobs in stream.shelljob.dev, under RBAC (the jobs
// a command creates through myshelljobs, the caller's own; a job named
// on the command line through shelljobs, then myshelljobs), whose
// server, the operator, alone reaches the workers. No command execs into
// a worker. The job's life itself (scheduling, the stop ladder, the idle
// timeout) is the operator's. A console is a ShellJob of mode Console.
package cli
