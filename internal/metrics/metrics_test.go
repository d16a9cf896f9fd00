package metrics_test

import (
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"shelljob.dev/shelljob/internal/metrics"
)

// TestRegistered: every name of Names is served from controller-runtime's
// registry, and passes Prometheus's lint (units, _total suffixes, help).
func TestRegistered(t *testing.T) {
	const pool = "registered"
	metrics.JobPlaced(pool, time.Second)
	metrics.JobStarted(pool, 50*time.Millisecond)
	metrics.JobFinished(pool, "Succeeded", "Exited")
	metrics.SignalSent(pool, "SIGINT")
	metrics.ExecFailed("start")
	metrics.SetPoolWorkers(pool, 2, 1)
	metrics.EventsDropped.WithLabelValues("Normal").Add(0)
	t.Cleanup(func() { metrics.ForgetPool(pool) })

	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var served []string
	for _, f := range families {
		served = append(served, f.GetName())
	}
	for _, name := range metrics.Names() {
		if !slices.Contains(served, name) {
			t.Errorf("%s is not served by controller-runtime's registry", name)
		}
	}
	problems, err := testutil.GatherAndLint(crmetrics.Registry, metrics.Names()...)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

func TestForgetPool(t *testing.T) {
	metrics.SetPoolWorkers("kept", 1, 0)
	metrics.SetPoolWorkers("gone", 3, 2)
	metrics.ForgetPool("gone")
	t.Cleanup(func() { metrics.ForgetPool("kept") })
	if n := testutil.CollectAndCount(metrics.PoolWorkers); n != 2 {
		t.Errorf("%d series after forgetting a pool, want the 2 of the other", n)
	}
	if got := testutil.ToFloat64(metrics.PoolWorkers.WithLabelValues("kept", metrics.WorkersReady)); got != 1 {
		t.Errorf("ready workers of the kept pool = %v, want 1", got)
	}
}
