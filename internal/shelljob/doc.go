// Package shelljob holds the predicates and status helpers of ShellJobs and
// ShellPools, in the style of Kueue's pkg/workload: IsFinished(job),
// SetFinishedCondition(job, now, reason, msg) and the like, and the rules
// of a job's life that its readers and the operator share. It does no I/O;
// the reconcilers in controllers/, the bot and the CLI call it.
//
// Where each rule lives:
//   - shelljob.go: the predicates, the phase, the conditions, the expiry.
//   - timeout.go: when a running job has timed out (Timeout).
//   - exit.go: how a job whose command exited ends (SetExited,
//     RecordExit).
//   - worker.go: how a worker pod's end ends the job that ran there
//     (WorkerEnd, WasEvicted, ShutdownEnd).
//   - end.go: how a finished job ended, as its readers tell it (EndOf).
//   - stop.go: what a client's stop does (DecideStop, Stop).
//   - origin.go: who sent and who owns a job (TelegramUser,
//     KubernetesUser), for the origins of every bot version, and whether
//     a job under a command's name is its own (SameCommand);
//     refusal.go: the words an admission policy refused a request with
//     (Refusal).
//   - slim.go: the job as the operator's cache keeps it; settle.go: when
//     a finished job leaves that cache, settled (Settles), and its labels;
//     quota.go: a create refused for the namespace's quota.
package shelljob
