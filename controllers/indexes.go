package controllers

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/shelljob"
)

// Field indexes of ShellJobs in the cache. Finished jobs stay in etcd until
// their TTL runs out, thousands of them in a busy namespace: the indexes
// that reconciles list by leave them out, so that a pass costs what the
// unfinished jobs cost.
const (
	// indexJobUnnumbered is the pool of an unfinished job that has no
	// number yet.
	indexJobUnnumbered = "unnumbered.spec.pool"
	// indexJobPod is the worker that an unfinished job holds (status.pod),
	// if any.
	indexJobPod = "unfinished.status.pod"
	// indexJobUndelivered is the worker of a finished job that is not
	// marked delivered (AnnotationDelivered): its reader may still need
	// the worker.
	indexJobUndelivered = "undelivered.status.pod"
	// indexJobUID is the UID of an unfinished job that holds a worker,
	// which is the agent's name for it: an agent knows only the jobs
	// started on it, each recorded on its worker first. Its events about a
	// finished job are not read. Every value is a set of its own, twice
	// (its namespace's and all): an index of every UID held most of the
	// indexes' memory with thousands of finished jobs, and of the backlog
	// of a burst with thousands waiting.
	indexJobUID = "assigned.metadata.uid"
)

// jobIndexes are the field indexes of ShellJobs, by name.
var jobIndexes = map[string]func(*shellv1alpha1.ShellJob) []string{
	indexJobUnnumbered: func(j *shellv1alpha1.ShellJob) []string {
		if j.Status.Number != 0 || shelljob.IsFinished(j) {
			return nil
		}
		return []string{shelljob.Pool(j)}
	},
	indexJobPod: func(j *shellv1alpha1.ShellJob) []string {
		if j.Status.Pod == "" || shelljob.IsFinished(j) {
			return nil
		}
		return []string{j.Status.Pod}
	},
	indexJobUndelivered: func(j *shellv1alpha1.ShellJob) []string {
		if _, ok := j.Annotations[shellv1alpha1.AnnotationDelivered]; ok || j.Status.Pod == "" || !shelljob.IsFinished(j) {
			return nil
		}
		return []string{j.Status.Pod}
	},
	indexJobUID: func(j *shellv1alpha1.ShellJob) []string {
		if !shelljob.IsAssigned(j) || shelljob.IsFinished(j) {
			return nil
		}
		return []string{string(j.UID)}
	},
}

// jobIndexFunc is the client.IndexerFunc of a ShellJob index.
func jobIndexFunc(field string) client.IndexerFunc {
	fn := jobIndexes[field]
	return func(o client.Object) []string { return fn(o.(*shellv1alpha1.ShellJob)) }
}

func setupIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	for field := range jobIndexes {
		if err := indexer.IndexField(ctx, &shellv1alpha1.ShellJob{}, field, jobIndexFunc(field)); err != nil {
			return err
		}
	}
	return nil
}

// jobsOnPod lists the unfinished jobs that hold a worker pod.
func jobsOnPod(ctx context.Context, c client.Reader, ns, pod string) ([]shellv1alpha1.ShellJob, error) {
	return listJobs(ctx, c, ns, indexJobPod, pod)
}

// undeliveredJobs lists the finished jobs that ended on a worker pod and
// are not marked delivered.
func undeliveredJobs(ctx context.Context, c client.Reader, ns, pod string) ([]shellv1alpha1.ShellJob, error) {
	return listJobs(ctx, c, ns, indexJobUndelivered, pod)
}

// listJobs lists the jobs whose index holds value. Their fields are the
// cache's own, not deep copies (the structs are copied: a pass over all
// the unfinished jobs of a pool lists them through PoolIndex). Callers
// read them and never change them; one that must, changes a DeepCopy.
func listJobs(ctx context.Context, c client.Reader, ns, index, value string, opts ...client.ListOption) ([]shellv1alpha1.ShellJob, error) {
	var list shellv1alpha1.ShellJobList
	opts = append(opts, client.InNamespace(ns), client.MatchingFields{index: value}, client.UnsafeDisableDeepCopy)
	err := c.List(ctx, &list, opts...)
	return list.Items, err
}

// jobsAwaitingNumber lists up to limit unfinished jobs of a pool that have
// no number yet.
func jobsAwaitingNumber(ctx context.Context, c client.Reader, ns, pool string, limit int64) ([]shellv1alpha1.ShellJob, error) {
	return listJobs(ctx, c, ns, indexJobUnnumbered, pool, client.Limit(limit))
}
