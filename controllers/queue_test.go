package controllers

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

// jobPasses counts the passes of the job controllers so far, whatever their
// result (controller-runtime's reconcile_total).
func jobPasses(t *testing.T) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == "shelljob" {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

// TestFreedWorkerUnderALongQueue: a worker freed under a queue of 100
// jobs goes to the oldest at the cost of a few passes, not a pass of
// every queued job, each of which lists the whole queue.
func TestFreedWorkerUnderALongQueue(t *testing.T) {
	const queued = 100
	ns := namespace(t)
	startOperator(t, ns, newFakeAgent())
	readyPool(t, ns, "shell", 1)
	createJob(t, utiltesting.MakeShellJob("busy", ns).Command("sleep 100"))
	waitPhase(t, ns, "busy", shellv1alpha1.PhaseRunning)
	for i := range queued {
		createJob(t, utiltesting.MakeShellJob(fmt.Sprintf("q%03d", i), ns).Command("sleep 100"))
	}
	for i := range queued {
		name := fmt.Sprintf("q%03d", i)
		eventually(t, waitShort, name+" queued", func() (bool, string) {
			j := getJob(t, ns, name)
			return meta.IsStatusConditionFalse(j.Status.Conditions, shellv1alpha1.ShellJobScheduled), fmt.Sprint(j.Status.Conditions)
		})
	}

	before := jobPasses(t)
	stopJob(t, ns, "busy", "")
	waitPhase(t, ns, "q000", shellv1alpha1.PhaseRunning)
	// The busy job's stop, signals and end, the head's placement, start
	// and Running: a dozen passes. A pass of each queued job would be 100
	// more (the placement looks at every queue again within 30 s,
	// placementRecheck: the test is over long before).
	n := jobPasses(t) - before
	t.Logf("%.0f job passes from the stop to the next job's start", n)
	if n > queued/2 {
		t.Errorf("%.0f job passes from the stop to the next job's start under a queue of %d, want a few", n, queued)
	}
}
