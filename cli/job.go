package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/pager"
	watchtools "k8s.io/client-go/tools/watch"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/shelljob"
	"shelljob.dev/shelljob/internal/texts"
)

// maxCommand is the API's limit on a command, in bytes
// (ShellJobSpec.Command).
const maxCommand = 64 << 10

// errCommandTooLong is the clear error for a command over maxCommand.
var errCommandTooLong = fmt.Errorf("the command is over 64 KiB (%d bytes), the most a ShellJob takes: split it, or copy the script to the worker and run it there", maxCommand)

// getJob finds a job by name, or by number as "N" or "#N".
func (c *Cluster) getJob(ctx context.Context, ref string) (*shellv1alpha1.ShellJob, error) {
	if n, err := strconv.ParseInt(strings.TrimPrefix(ref, "#"), 10, 64); err == nil {
		jobs, err := c.listJobs(ctx, func(j *shellv1alpha1.ShellJob) bool { return j.Status.Number == n })
		if err != nil {
			return nil, err
		}
		if len(jobs) > 0 {
			return &jobs[0], nil
		}
		return nil, fmt.Errorf("no shelljob #%d in namespace %s", n, c.Namespace)
	}
	return c.Jobs.Get(ctx, ref, metav1.GetOptions{})
}

// findJob is getJob with an error for people: "No running command #3
// here." for a number, "shelljob "x" not found" for a name.
func (c *Cluster) findJob(ctx context.Context, ref string) (*shellv1alpha1.ShellJob, error) {
	j, err := c.getJob(ctx, ref)
	if err == nil {
		return j, nil
	}
	if n, nerr := strconv.ParseInt(strings.TrimPrefix(ref, "#"), 10, 64); nerr == nil {
		return nil, errors.New(texts.NoSuchJob(n))
	}
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("shelljob %q not found", ref)
	}
	return nil, err
}

// listJobs lists the namespace's ShellJobs a page at a time, so that no
// response holds every job with its command of up to 64 KiB, and returns
// those keep accepts (all if keep is nil).
func (c *Cluster) listJobs(ctx context.Context, keep func(*shellv1alpha1.ShellJob) bool) ([]shellv1alpha1.ShellJob, error) {
	p := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return c.Jobs.List(ctx, opts)
	})
	var out []shellv1alpha1.ShellJob
	err := p.EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
		if j := obj.(*shellv1alpha1.ShellJob); keep == nil || keep(j) {
			out = append(out, *j)
		}
		return nil
	})
	return out, err
}

// watchJob calls fn with the job after each change, from the version of
// sj on, until fn returns true (watchJob returns nil), ctx ends or the job
// is deleted. It watches again after the API server ends a watch.
func (c *Cluster) watchJob(ctx context.Context, sj *shellv1alpha1.ShellJob, fn func(*shellv1alpha1.ShellJob) bool) error {
	if fn(sj) {
		return nil
	}
	byName := fields.OneTermEqualSelector("metadata.name", sj.Name)
	lw := &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		opts.FieldSelector = byName.String()
		return c.Jobs.Watch(ctx, opts)
	}}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, sj.ResourceVersion, lw)
	if err != nil {
		return err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return fmt.Errorf("watch of shelljob %s ended", sj.Name)
			}
			switch ev.Type {
			case watch.Deleted:
				return fmt.Errorf("shelljob %s was deleted", sj.Name)
			case watch.Error:
				return apierrors.FromObject(ev.Object)
			case watch.Added, watch.Modified:
				if obj, ok := ev.Object.(*shellv1alpha1.ShellJob); ok && obj.Name == sj.Name && fn(obj) {
					return nil
				}
			}
		}
	}
}

// startRecorded waits, up to shelljob.StartRecordWait, until the status
// of job sj, which is being started (shelljob.IsStarting), records its
// start or its end, and returns the job as it was last seen.
func (c *Cluster) startRecorded(ctx context.Context, sj *shellv1alpha1.ShellJob) (*shellv1alpha1.ShellJob, error) {
	ctx, cancel := context.WithTimeout(ctx, shelljob.StartRecordWait)
	defer cancel()
	last := sj
	err := c.watchJob(ctx, sj, func(j *shellv1alpha1.ShellJob) bool {
		last = j
		return !shelljob.IsStarting(j)
	})
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
		err = nil
	}
	return last, err
}

// stopJob asks the job to stop with reason User, as the chat's .k does
// (shelljob.Stop).
func (c *Cluster) stopJob(ctx context.Context, name string) (shelljob.StopOutcome, error) {
	out, _, err := shelljob.Stop(ctx, jobPatcher{c.Jobs}, name, shellv1alpha1.StopReasonUser, "")
	return out, err
}

// jobPatcher is a JobClient as a shelljob.JobPatcher.
type jobPatcher struct{ jobs JobClient }

func (p jobPatcher) Get(ctx context.Context, name string) (*shellv1alpha1.ShellJob, error) {
	return p.jobs.Get(ctx, name, metav1.GetOptions{})
}

func (p jobPatcher) MergePatch(ctx context.Context, name string, patch []byte) (*shellv1alpha1.ShellJob, error) {
	return p.jobs.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
}

// markDelivered marks job name delivered (AnnotationDelivered) at now, as
// the bot marks the jobs it delivered, with a merge patch of that
// annotation alone: the operator then lets a retired worker go at once
// and counts the job's TTL from the mark.
func (c *Cluster) markDelivered(ctx context.Context, name string, now time.Time) error {
	if _, err := (jobPatcher{c.Jobs}).MergePatch(ctx, name, shelljob.DeliveredPatch("", now)); err != nil {
		return fmt.Errorf("mark shelljob %s delivered: %w", name, err)
	}
	return nil
}

// age is how old t is, as kubectl shows it.
func age(now time.Time, t metav1.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}
