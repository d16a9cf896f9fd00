// Package scheduler decides which worker of a ShellPool runs a queued
// ShellJob, and holds the queues of the jobs that wait. Its decisions are
// pure, as Kueue's flavorassigner is: Schedule takes a snapshot of the
// pool's workers and jobs and returns a Decision for each queued job, with
// no client and no clock. Queues is the waiting room, as Kueue's queue
// manager is: one FIFO per pool, whose Heads blocks until a pool has news.
// The operator's placement (controllers/placement.go, a manager Runnable)
// takes the heads, builds the snapshot from its cache and hands each job
// its decision; the ShellJob reconciler queues the jobs and records the
// decisions.
//
// The rules, from the design:
//   - Queued jobs are placed in FIFO order: creation time, then name
//     (Compare; the queues keep that order too).
//   - Fork takes any free worker of the current revision. It prefers the
//     least loaded one, and the stateful worker last, so that a Stateful job
//     finds it free more often. A worker the job's client prefers (the
//     one where it already opened the job's follow) comes first when it is
//     free and not the stateful worker.
//   - Console is placed as Fork is.
//   - Stateful waits for the pool's stateful worker to be free.
//   - Direct never waits for a free worker: it runs on the least loaded
//     ready worker, even a busy one, and takes no seat.
//   - A worker is free when no Fork, Console or Stateful job holds it; Direct jobs
//     only add to its load.
//   - Workers of an old revision, not ready, being deleted, beyond the
//     pool's replicas or whose spool is full take no new jobs; so queued
//     jobs move to a restarted pool's new revision.
//   - A job asked to stop while it waits leaves its queue and is never
//     placed (Waits).
//   - Before any worker: a job of a pool that requires approval waits
//     until it is approved (AwaitingApproval), and a job whose user (its
//     origin's) already holds the pool's maxRunningPerUser workers, Direct
//     jobs included, waits for one of them to end (MaxRunningPerUser).
//     Such a job takes nothing, so the jobs of other users behind it are
//     placed past it, while its user's later jobs wait behind it. Jobs
//     with no user share one cap.
package scheduler
