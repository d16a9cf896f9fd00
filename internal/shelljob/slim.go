package shelljob

import (
	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/kubeutil"
)

// Slim strips a job, in place, to what a cache of jobs keeps when its
// reader never reads their commands from it: no spec.command (up to 64 KiB
// each), no managed fields, no kubectl last-applied-configuration. A
// reader that needs a command gets that one job from the API server. The
// job's status.summary, which the operator writes from the command, is
// filled in first if it is not yet, so that the cache still has it and the
// operator can write it. A slim job is left as it is (StripForCache).
func Slim(j *shellv1alpha1.ShellJob) {
	kubeutil.StripForCache(j)
	if j.Spec.Command == "" {
		return
	}
	if j.Status.Summary == "" {
		j.Status.Summary = Summary(j.Spec.Command)
	}
	j.Spec.Command = ""
}

// SlimTransform is Slim as a cache's transform (cache.ByObject.Transform):
// ShellJobs are slimmed, anything else passes unchanged.
func SlimTransform(obj any) (any, error) {
	if j, ok := obj.(*shellv1alpha1.ShellJob); ok {
		Slim(j)
	}
	return obj, nil
}
