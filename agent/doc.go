// Package agent is the worker pod's agent: a daemon, PID 1 of the pod, that
// runs shell commands in process groups of their own, spools their output
// (package spool), and reports their exit status; and the Client that its
// subcommands (cmd/agent) use to reach it over a unix socket in the spool
// directory.
//
// A Fork or Direct job runs in its shell in a new session, so its process
// group id is its pid; the shell reads the command from a descriptor
// (`SHELL -c 'eval "$(<&3)" 3<&-'`), never from its argv, which every
// process may read in /proc. A Console job runs so too, on a
// pseudo-terminal of its own that one attach at a time reaches; see
// console.go. A Stateful job is fed to the worker's persistent zsh, one at
// a time; see stateful.go for how the shell keeps its state through a
// stop, and what a restart of it loses.
//
// A job ends once its command has exited and its output is closed. When
// the output stays open after the command's process group is empty (a
// process that left the group, such as a setsid daemon, holds it), the job
// ends OrphanGrace after the group was found empty, and what that process
// writes later is not read. A Fork job leaves nothing behind: when it
// ends, the agent kills what is left of it (the end of its namespaces,
// sandbox.go, and every process of its user, cleanup.go) and removes its
// user's files from the shared places (/tmp and the like). Its spool stays
// for its readers while the worker has room (budget.go).
//
// Layout of the spool directory:
//
//	agent.sock            the daemon's socket
//	zdotdir/              empty: ZDOTDIR of every shell, so no startup file prints
//	jobs/UID/job.json     how the job started
//	jobs/UID/command      the command
//	jobs/UID/files/       $SHELLJOB_OUT: inputs before the start, outputs after
//	jobs/UID/home/        an isolated Fork job's HOME and cwd, while it runs
//	jobs/UID/output/      the spool
//	jobs/UID/exit.json    the exit status and counters, once the job ended
//	jobs/UID/delivered    there once its reader has its output and files
//
// Where the agent may, each job's command runs as a user of its own, and
// the spool's owners and modes keep every job out of the others' and out
// of the socket; see isolate.go. Where the worker allows it too, each job
// runs in namespaces of its own, and sees no other job's processes; see
// sandbox.go.
//
// The daemon reaps every process with wait4(-1) (package proc), so it must
// not be embedded in a process that waits for its own children; tests run
// it as a subprocess.
package agent
