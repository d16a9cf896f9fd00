package controllers

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/shelljob"
)

// Field indexes of ShellJobs in the cache.
const (
	// indexJobPool is the job's pool (spec.pool, defaulted).
	indexJobPool = "spec.pool"
	// indexJobPod is the worker the job holds (status.pod), if any.
	indexJobPod = "status.pod"
	// indexJobUID is the job's UID, which is the agent's name for it.
	indexJobUID = "metadata.uid"
)

func setupIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	job := &shellv1alpha1.ShellJob{}
	indexes := map[string]func(*shellv1alpha1.ShellJob) []string{
		indexJobPool: func(j *shellv1alpha1.ShellJob) []string { return []string{shelljob.Pool(j)} },
		indexJobPod: func(j *shellv1alpha1.ShellJob) []string {
			if j.Status.Pod == "" {
				return nil
			}
			return []string{j.Status.Pod}
		},
		indexJobUID: func(j *shellv1alpha1.ShellJob) []string { return []string{string(j.UID)} },
	}
	for field, fn := range indexes {
		if err := indexer.IndexField(ctx, job, field, func(o client.Object) []string {
			return fn(o.(*shellv1alpha1.ShellJob))
		}); err != nil {
			return err
		}
	}
	return nil
}

// jobsOfPool lists the unfinished jobs of a pool.
func jobsOfPool(ctx context.Context, c client.Reader, ns, pool string) ([]shellv1alpha1.ShellJob, error) {
	return unfinishedJobs(ctx, c, client.InNamespace(ns), client.MatchingFields{indexJobPool: pool})
}

// allJobsOfPool lists every job of a pool, finished or not.
func allJobsOfPool(ctx context.Context, c client.Reader, ns, pool string) ([]shellv1alpha1.ShellJob, error) {
	var list shellv1alpha1.ShellJobList
	err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingFields{indexJobPool: pool})
	return list.Items, err
}

// jobsOnPod lists the unfinished jobs that hold a worker pod.
func jobsOnPod(ctx context.Context, c client.Reader, ns, pod string) ([]shellv1alpha1.ShellJob, error) {
	return unfinishedJobs(ctx, c, client.InNamespace(ns), client.MatchingFields{indexJobPod: pod})
}

func unfinishedJobs(ctx context.Context, c client.Reader, opts ...client.ListOption) ([]shellv1alpha1.ShellJob, error) {
	var list shellv1alpha1.ShellJobList
	if err := c.List(ctx, &list, opts...); err != nil {
		return nil, err
	}
	jobs := list.Items[:0]
	for _, j := range list.Items {
		if !shelljob.IsFinished(&j) {
			jobs = append(jobs, j)
		}
	}
	return jobs, nil
}
