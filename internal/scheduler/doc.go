// Package scheduler decides which worker of a ShellPool runs a queued
// ShellJob. It is pure, as Kueue's flavorassigner is: Place takes a snapshot
// of the pool's workers and jobs and returns a Decision, with no client and
// no clock. The ShellJob reconciler builds the snapshot from its cache and
// applies the decision.
//
// The rules, from the design:
//   - Queued jobs are placed in FIFO order: creation time, then name.
//   - Fork takes any free worker of the current revision. It prefers the
//     least loaded one, and the stateful worker last, so that a Stateful job
//     finds it free more often. A worker the job's client prefers (the
//     one where it already opened the job's follow) comes first when it is
//     free and not the stateful worker.
//   - Console is placed as Fork is.
//   - Stateful waits for the pool's stateful worker to be free.
//   - Direct never waits for a free worker: it runs on the least loaded
//     ready worker, even a busy one, and takes no seat.
//   - A worker is free when no Fork, Console or Stateful job holds it;
//     Direct jobs only add to its load.
//   - Workers of an old revision, not ready, being deleted or beyond the
//     pool's replicas take no new jobs.
package scheduler
