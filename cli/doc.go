// Package cli is kubectl-shelljob, the kubectl plugin that gives terminal
// users the jobs that the Telegram bot gives chat admins: exec, repl,
// console, logs, ls, stop, approve, deny, pools and render.
//
// [NewCmd] builds the root command from [Options]; each subcommand lives in
// a file of its own, with options that Complete reads from the command line
// and Run carries out. The commands reach the cluster through a [Cluster]
// made from kubectl's own flags (k8s.io/cli-runtime), so that tests can
// give fakes. Jobs are created as ShellJobs and followed through their
// status and the agent's spool; the job's life itself (scheduling, the stop
// ladder, the idle timeout) is the operator's. A console is a ShellJob of
// mode Console too, whose terminal the [Attacher] reaches through the
// attach subresource of the aggregated API: no command execs into a worker
// with a terminal.
package cli
