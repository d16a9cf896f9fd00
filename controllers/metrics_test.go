package controllers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/metrics"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

// sampleCount is how many observations a histogram of pool holds.
func sampleCount(t *testing.T, h *prometheus.HistogramVec, pool string) uint64 {
	t.Helper()
	var m dto.Metric
	if err := h.WithLabelValues(pool).(prometheus.Metric).Write(&m); err != nil {
		t.Fatalf("read histogram: %v", err)
	}
	return m.GetHistogram().GetSampleCount()
}

// poolSeries counts the series of PoolWorkers that belong to pool.
func poolSeries(pool string) int {
	ch := make(chan prometheus.Metric, 16)
	go func() {
		metrics.PoolWorkers.Collect(ch)
		close(ch)
	}()
	n := 0
	for m := range ch {
		var d dto.Metric
		if m.Write(&d) != nil {
			continue
		}
		for _, l := range d.GetLabel() {
			if l.GetName() == "pool" && l.GetValue() == pool {
				n++
			}
		}
	}
	return n
}

// TestMetrics runs a succeeding, a failing and a stopped job through the
// operator, with one Start that fails and is retried, and reads what the
// metrics counted: each start and end once, a queue wait and a start
// latency per job, the stop ladder's signals, the failed execs by
// subcommand, and the pool's ready and busy workers until it is deleted.
func TestMetrics(t *testing.T) {
	// The metrics are global and labelled by pool name only: this pool
	// name is used by no other test, and counters are read as deltas.
	const pool = "metered"
	ns := namespace(t)
	agent := newFakeAgent()
	startOperator(t, ns, agent)
	readyPool(t, ns, pool, 2)

	// What the test reads of the jobs' metrics, by a name of its own.
	read := func() map[string]float64 {
		out := map[string]float64{
			"started":         testutil.ToFloat64(metrics.JobsStarted.WithLabelValues(pool)),
			"queue waits":     float64(sampleCount(t, metrics.QueueWait, pool)),
			"start latencies": float64(sampleCount(t, metrics.StartLatency, pool)),
		}
		for _, e := range [][2]string{
			{string(shellv1alpha1.PhaseSucceeded), shellv1alpha1.ShellJobFinishedReasonExited},
			{string(shellv1alpha1.PhaseFailed), shellv1alpha1.ShellJobFinishedReasonExited},
			{string(shellv1alpha1.PhaseStopped), shellv1alpha1.ShellJobFinishedReasonStopped},
		} {
			out["finished "+e[0]+"/"+e[1]] = testutil.ToFloat64(metrics.JobsFinished.WithLabelValues(pool, e[0], e[1]))
		}
		for _, s := range []shellv1alpha1.Signal{shellv1alpha1.SIGINT, shellv1alpha1.SIGTERM, shellv1alpha1.SIGKILL} {
			out["signal "+string(s)] = testutil.ToFloat64(metrics.StopSignals.WithLabelValues(pool, string(s)))
		}
		for _, sub := range []string{agentapi.CmdStart, agentapi.CmdSignal, agentapi.CmdEvents} {
			out["exec errors "+sub] = testutil.ToFloat64(metrics.AgentExecErrors.WithLabelValues(sub))
		}
		return out
	}
	before := read()

	workers := func(state string) float64 {
		return testutil.ToFloat64(metrics.PoolWorkers.WithLabelValues(pool, state))
	}
	eventually(t, waitShort, "2 ready workers, none busy", func() (bool, string) {
		r, b := workers(metrics.WorkersReady), workers(metrics.WorkersBusy)
		return r == 2 && b == 0, fmt.Sprintf("ready %v, busy %v", r, b)
	})

	createJob(t, utiltesting.MakeShellJob("stopped", ns).Pool(pool).Command(ignoresINT+"; sleep 100"))
	running := waitPhase(t, ns, "stopped", shellv1alpha1.PhaseRunning)
	eventually(t, waitShort, "2 ready workers, 1 busy", func() (bool, string) {
		r, b := workers(metrics.WorkersReady), workers(metrics.WorkersBusy)
		return r == 2 && b == 1, fmt.Sprintf("ready %v, busy %v", r, b)
	})

	agent.failStarts(1)
	createJob(t, utiltesting.MakeShellJob("ok", ns).Pool(pool).Command("echo hi"))
	waitPhase(t, ns, "ok", shellv1alpha1.PhaseSucceeded)
	createJob(t, utiltesting.MakeShellJob("bad", ns).Pool(pool).Command("exit 3"))
	waitPhase(t, ns, "bad", shellv1alpha1.PhaseFailed)
	stopJob(t, ns, "stopped", "")
	waitPhase(t, ns, "stopped", shellv1alpha1.PhaseStopped)
	// A broken events stream is a failed exec; the operator opens it again.
	agent.breakStreams(podKey(running))

	want := map[string]float64{
		"started": 3, "queue waits": 3, "start latencies": 3,
		"finished Succeeded/Exited": 1, "finished Failed/Exited": 1, "finished Stopped/Stopped": 1,
		"signal SIGINT": 1, "signal SIGTERM": 1, "signal SIGKILL": 0,
		"exec errors start": 1, "exec errors signal": 0, "exec errors events": 1,
	}
	eventually(t, waitShort, "the jobs' metrics", func() (bool, string) {
		got := read()
		for k := range got {
			got[k] -= before[k]
		}
		diff := cmp.Diff(want, got)
		return diff == "", "(-want +got)\n" + diff
	})
	eventually(t, waitShort, "no busy worker", func() (bool, string) {
		b := workers(metrics.WorkersBusy)
		return b == 0, fmt.Sprintf("busy %v", b)
	})

	if err := env.Client.Delete(context.Background(), getPool(t, ns, pool)); err != nil {
		t.Fatalf("delete pool: %v", err)
	}
	eventually(t, waitShort, "no series of the deleted pool", func() (bool, string) {
		n := poolSeries(pool)
		return n == 0, fmt.Sprintf("%d series", n)
	})
}

// errAgent fails every call with err.
type errAgent struct{ err error }

func (a errAgent) Start(context.Context, types.NamespacedName, agentapi.StartRequest) (agentapi.StartResponse, error) {
	return agentapi.StartResponse{}, a.err
}

func (a errAgent) Signal(context.Context, types.NamespacedName, string, agentapi.Signal) (agentapi.SignalResponse, error) {
	return agentapi.SignalResponse{}, a.err
}

func (a errAgent) Events(context.Context, types.NamespacedName, func(agentapi.Event)) error {
	return a.err
}

func (a errAgent) Follow(context.Context, types.NamespacedName, string, int64, io.Writer) (int64, error) {
	return 0, a.err
}

func (a errAgent) FollowText(context.Context, types.NamespacedName, string, agentapi.TextMode, io.Writer) error {
	return a.err
}

func (a errAgent) PutFiles(context.Context, types.NamespacedName, string, io.Reader) error {
	return a.err
}

func (a errAgent) GetFiles(context.Context, types.NamespacedName, string, int64, io.Writer) error {
	return a.err
}

func (a errAgent) Delivered(context.Context, types.NamespacedName, string) error {
	return a.err
}

func (a errAgent) Hangup(context.Context, types.NamespacedName, string, string) error {
	return a.err
}

// TestAgentExecErrors: each failed call counts once under its
// subcommand; a call that succeeded, or that the operator canceled, does
// not count, and one that ran out of time does.
func TestAgentExecErrors(t *testing.T) {
	pod := types.NamespacedName{Namespace: "w", Name: "p-0"}
	calls := map[string]func(context.Context, agentapi.Client) error{
		agentapi.CmdStart: func(ctx context.Context, a agentapi.Client) error {
			_, err := a.Start(ctx, pod, agentapi.StartRequest{Job: "j"})
			return err
		},
		agentapi.CmdSignal: func(ctx context.Context, a agentapi.Client) error {
			_, err := a.Signal(ctx, pod, "j", agentapi.SIGINT)
			return err
		},
		agentapi.CmdEvents: func(ctx context.Context, a agentapi.Client) error {
			return a.Events(ctx, pod, func(agentapi.Event) {})
		},
		agentapi.CmdFollow: func(ctx context.Context, a agentapi.Client) error {
			_, err := a.Follow(ctx, pod, "j", 0, io.Discard)
			return err
		},
		agentapi.CmdPutFiles: func(ctx context.Context, a agentapi.Client) error {
			return a.PutFiles(ctx, pod, "j", strings.NewReader(""))
		},
		agentapi.CmdGetFiles: func(ctx context.Context, a agentapi.Client) error {
			return a.GetFiles(ctx, pod, "j", 0, io.Discard)
		},
		agentapi.CmdDelivered: func(ctx context.Context, a agentapi.Client) error {
			return a.Delivered(ctx, pod, "j")
		},
	}
	failing := countingAgent{Client: errAgent{err: errors.New("exec: connection refused")}}
	fine := countingAgent{Client: errAgent{}}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()

	for sub, call := range calls {
		t.Run(sub, func(t *testing.T) {
			counter := metrics.AgentExecErrors.WithLabelValues(sub)
			before := testutil.ToFloat64(counter)
			if err := call(context.Background(), failing); err == nil {
				t.Fatal("the failing agent's call succeeded")
			}
			if err := call(context.Background(), fine); err != nil {
				t.Fatalf("the fine agent's call: %v", err)
			}
			_ = call(canceled, failing)
			_ = call(expired, failing)
			if got := testutil.ToFloat64(counter) - before; got != 2 {
				t.Errorf("%s errors +%v, want +2: the failed call and the one out of time", sub, got)
			}
		})
	}
}

// TestEndCountedOnceAcrossRetries: a pass whose status write fails counts
// nothing; the retried pass that records the end counts it, and later
// passes over the ended job do not count it again.
func TestEndCountedOnceAcrossRetries(t *testing.T) {
	const pool = "retried"
	job := utiltesting.MakeShellJob("j", "ns").Pool(pool).Stop(shellv1alpha1.StopReasonUser).Obj()
	job.UID = "uid-retried"
	conflicts := 1
	c := fake.NewClientBuilder().WithScheme(fakeScheme(t)).WithObjects(job).WithStatusSubresource(job).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				if conflicts > 0 {
					conflicts--
					return apierrors.NewConflict(schema.GroupResource{Resource: "shelljobs"}, obj.GetName(), nil)
				}
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			},
		}).Build()
	r := &ShellJobReconciler{
		Client: c, APIReader: c, Recorder: events.NewFakeRecorder(16), Clock: clock.RealClock{}, JobTTL: KeepFinishedJobs,
		memory: newJobMemory(), numbers: newNumberer(c, c, c), writes: newWrites(),
	}
	ended := metrics.JobsFinished.WithLabelValues(pool, string(shellv1alpha1.PhaseStopped), shellv1alpha1.ShellJobFinishedReasonStoppedBeforeRun)
	before := testutil.ToFloat64(ended)
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(job)}

	for pass, want := range []float64{0, 1, 1} {
		if _, err := r.Reconcile(context.Background(), req); err != nil {
			t.Fatalf("pass %d: %v", pass, err)
		}
		if got := testutil.ToFloat64(ended) - before; got != want {
			t.Errorf("after pass %d: ends counted +%v, want +%v", pass, got, want)
		}
	}
	if j := getJobFrom(t, c, req.NamespacedName); j.Status.Phase != shellv1alpha1.PhaseStopped {
		t.Errorf("phase %q, want Stopped", j.Status.Phase)
	}
}

func getJobFrom(t *testing.T, c client.Client, key types.NamespacedName) *shellv1alpha1.ShellJob {
	t.Helper()
	j := &shellv1alpha1.ShellJob{}
	if err := c.Get(context.Background(), key, j); err != nil {
		t.Fatalf("get job: %v", err)
	}
	return j
}
