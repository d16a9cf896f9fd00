package eventlimit_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"

	"shelljob.dev/shelljob/internal/eventlimit"
)

// A burst past the limiter's is dropped and counted by type; what it lets
// through reaches the recorder behind it as it was. Warnings have a budget
// of their own, which a burst of Normal Events does not spend.
func TestBurstDropped(t *testing.T) {
	fake := events.NewFakeRecorder(100)
	dropped := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dropped"}, []string{"type"})
	r := eventlimit.New(fake, eventlimit.Options{PerSecond: 0.001, Burst: 3, Dropped: dropped})
	pod := &corev1.Pod{}
	for i := range 8 {
		r.Eventf(pod, nil, corev1.EventTypeNormal, "Started", "Start", "#%d started", i)
	}
	for i := range 4 {
		r.Eventf(pod, nil, corev1.EventTypeWarning, "StartFailed", "Start", "no %d", i)
	}
	close(fake.Events)
	var got []string
	for e := range fake.Events {
		got = append(got, e)
	}
	want := []string{"Normal Started #0 started", "Normal Started #1 started", "Normal Started #2 started",
		"Warning StartFailed no 0", "Warning StartFailed no 1", "Warning StartFailed no 2"}
	if len(got) != len(want) {
		t.Fatalf("recorded %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d = %q, want %q", i, got[i], want[i])
		}
	}
	if n := testutil.ToFloat64(dropped.WithLabelValues(corev1.EventTypeNormal)); n != 5 {
		t.Errorf("%v Normal Events dropped, want 5", n)
	}
	if n := testutil.ToFloat64(dropped.WithLabelValues(corev1.EventTypeWarning)); n != 1 {
		t.Errorf("%v Warning Events dropped, want 1", n)
	}
}

// Options left zero take the defaults: a burst of DefaultBurst goes
// through at once.
func TestDefaults(t *testing.T) {
	fake := events.NewFakeRecorder(eventlimit.DefaultBurst + 1)
	r := eventlimit.New(fake, eventlimit.Options{})
	for range eventlimit.DefaultBurst {
		r.Eventf(&corev1.Pod{}, nil, corev1.EventTypeNormal, "Queued", "Queue", "queued")
	}
	if n := len(fake.Events); n != eventlimit.DefaultBurst {
		t.Errorf("%d Events of a burst of %d went through", n, eventlimit.DefaultBurst)
	}
}
