// Package shelljob holds the predicates and status helpers of ShellJobs and
// ShellPools, in the style of Kueue's pkg/workload: IsFinished(job),
// SetFinishedCondition(job, now, reason, msg) and the like. It does no I/O;
// the reconcilers in controllers/ call it.
package shelljob
