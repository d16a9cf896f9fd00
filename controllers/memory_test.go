package controllers

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

// held counts what the reconciler holds in memory of jobs: the jobs it
// remembers (uids), of them those with each kind of memory, the
// placements assumed and the jobs queued.
func (r *ShellJobReconciler) held() map[string]int {
	m := r.memory
	m.mu.Lock()
	out := map[string]int{"uids": len(m.jobs), "starts": 0, "stops": 0, "placed": 0, "facts": 0, "taken": 0}
	for _, j := range m.jobs {
		for name, has := range map[string]bool{"starts": j.starts > 0, "stops": len(j.stops) > 0,
			"placed": !j.placedAt.IsZero(), "facts": j.reported, "taken": j.number != 0} {
			if has {
				out[name]++
			}
		}
	}
	m.mu.Unlock()
	a := r.placement.assumed
	a.mu.Lock()
	pools := make([]*poolAssumptions, 0, len(a.pools))
	for _, p := range a.pools {
		pools = append(pools, p)
	}
	a.mu.Unlock()
	for _, p := range pools {
		p.mu.Lock()
		out["assumed"] += len(p.pods)
		p.mu.Unlock()
	}
	out["queued"] = r.queues.Len()
	return out
}

// forceDelete deletes a job past its finalizer, as `kubectl patch` of the
// finalizers and `kubectl delete` would.
func forceDelete(t *testing.T, ns, name string) {
	t.Helper()
	ctx := context.Background()
	j := getJob(t, ns, name)
	from := j.DeepCopy()
	j.Finalizers = nil
	if err := env.Client.Patch(ctx, j, client.MergeFrom(from)); err != nil {
		t.Fatalf("drop the finalizers of %s: %v", name, err)
	}
	if err := env.Client.Delete(ctx, j); client.IgnoreNotFound(err) != nil {
		t.Fatalf("delete %s: %v", name, err)
	}
}

// TestForceDeleteForgets: jobs deleted past their finalizer in every phase
// leave nothing behind in the operator's memory.
func TestForceDeleteForgets(t *testing.T) {
	ns := namespace(t)
	agent := newFakeAgent()
	// A long grace keeps the stopping job in Stopping.
	op := startOperatorWith(t, ns, Options{Agent: agent, StopGrace: time.Minute})
	readyPool(t, ns, "shell", 3)

	createJob(t, utiltesting.MakeShellJob("succeeded", ns).Command("echo hi"))
	waitPhase(t, ns, "succeeded", shellv1alpha1.PhaseSucceeded)
	createJob(t, utiltesting.MakeShellJob("failed", ns).Command("exit 3"))
	waitPhase(t, ns, "failed", shellv1alpha1.PhaseFailed)
	createJob(t, utiltesting.MakeShellJob("running", ns).Command("sleep 100"))
	waitPhase(t, ns, "running", shellv1alpha1.PhaseRunning)
	createJob(t, utiltesting.MakeShellJob("stopping", ns).Command(ignoresTERM+"; sleep 100"))
	waitPhase(t, ns, "stopping", shellv1alpha1.PhaseRunning)
	stopJob(t, ns, "stopping", "")
	waitPhase(t, ns, "stopping", shellv1alpha1.PhaseStopping)
	// Every Start fails from now on: the next job keeps its worker and
	// retries.
	agent.failStarts(1 << 20)
	createJob(t, utiltesting.MakeShellJob("starting", ns).Command("sleep 100"))
	eventually(t, waitShort, "a Start of job starting", func() (bool, string) {
		h := op.jobs.held()
		return h["starts"] == 3, fmt.Sprint(h)
	})
	createJob(t, utiltesting.MakeShellJob("queued", ns).Command("sleep 100"))
	eventually(t, waitShort, "job queued waits for a worker", func() (bool, string) {
		j := getJob(t, ns, "queued")
		c := meta.FindStatusCondition(j.Status.Conditions, shellv1alpha1.ShellJobScheduled)
		return j.Status.Number != 0 && c != nil && c.Status == "False", fmt.Sprintf("number %d, %v", j.Status.Number, c)
	})
	if h := op.jobs.held(); h["stops"] == 0 || h["facts"] == 0 {
		t.Fatalf("held %v: want the stopping job's signals and the running jobs' facts", h)
	}

	// The queued job first, so it never gets the worker of another.
	for _, name := range []string{"queued", "starting", "stopping", "running", "failed", "succeeded"} {
		forceDelete(t, ns, name)
	}
	eventually(t, waitShort, "nothing held of the deleted jobs", func() (bool, string) {
		h := op.jobs.held()
		for _, n := range h {
			if n != 0 {
				return false, fmt.Sprint(h)
			}
		}
		return true, ""
	})
}
