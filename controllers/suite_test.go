package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"shelljob.dev/shelljob/agent/agenttest"
	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/testenv"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

// These tests run the operator against a real kube-apiserver (envtest),
// with the fake agent in place of the worker pods' agents. There is no
// kubelet: tests make worker pods ready themselves.

var env *testenv.Env

// Timeouts of the waits in these tests.
const (
	waitShort = 10 * time.Second
	poll      = 20 * time.Millisecond
	// testStopGrace shortens the 2 s between stop signals, and leaves a
	// loaded machine time to record a signalled job's exit before the
	// next signal (at 300 ms, a CI run under load sent SIGKILL after a
	// SIGTERM the job had already died of).
	testStopGrace = time.Second
)

func TestMain(m *testing.M) {
	// A real agent daemon for the tests of realagent_test.go.
	agenttest.RunIfAgent()
	testenv.Main(m, &env)
}

// namespace makes a namespace of its own for one test.
func namespace(t *testing.T) string { return env.Namespace(t, "t") }

// operator is one run of the operator, watching one namespace.
type operator struct {
	*reconcilers
	mgr    ctrl.Manager
	cancel context.CancelFunc
	done   chan struct{}
}

// startOperator runs the operator on ns until the test ends or stop is
// called.
func startOperator(t *testing.T, ns string, agent agentapi.Client) *operator {
	t.Helper()
	return startOperatorWith(t, ns, Options{Agent: agent, StopGrace: testStopGrace})
}

// startOperatorWith runs the operator with opts.
func startOperatorWith(t *testing.T, ns string, opts Options) *operator {
	t.Helper()
	if opts.Namespace == "" {
		opts.Namespace = ns
	}
	opts.Pools = NewPoolIndex()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 env.Scheme,
		Logger:                 utiltesting.Logger(t),
		Cache:                  CacheOptions(ns, opts.WorkerNamespace, opts.Pools),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		// As the operator's main.
		GracefulShutdownTimeout: ptr.To(GracefulShutdownTimeout),
	})
	if err != nil {
		t.Fatalf("new manager: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rs, err := setup(ctx, mgr, opts)
	if err != nil {
		cancel()
		t.Fatalf("setup: %v", err)
	}
	op := &operator{reconcilers: rs, mgr: mgr, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(op.done)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	t.Cleanup(op.stop)
	return op
}

// stop stops the operator and waits until it has.
func (o *operator) stop() {
	o.cancel()
	<-o.done
}

// eventually polls cond until it holds or the wait runs out; cond says
// what it saw.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var seen string
	for {
		var ok bool
		if ok, seen = cond(); ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; last seen: %s", timeout, what, seen)
		}
		time.Sleep(poll)
	}
}

// readyPool creates a pool and makes its workers ready, as the kubelet
// would once the agent answers.
func readyPool(t *testing.T, ns, name string, replicas int32) *shellv1alpha1.ShellPool {
	t.Helper()
	pool := utiltesting.MakeShellPool(name, ns).Replicas(replicas).Obj()
	if err := env.Client.Create(context.Background(), pool); err != nil {
		t.Fatalf("create pool: %v", err)
	}
	markWorkersReady(t, ns, name, replicas)
	return pool
}

// markWorkersReady waits for n workers of the pool's current revision and
// makes them Running and Ready.
func markWorkersReady(t *testing.T, ns, pool string, n int32) []corev1.Pod {
	t.Helper()
	return markWorkersReadyIn(t, ns, ns, pool, n)
}

// markWorkersReadyIn is markWorkersReady for a pool of ns whose workers
// live in workerNS.
func markWorkersReadyIn(t *testing.T, ns, workerNS, pool string, n int32) []corev1.Pod {
	t.Helper()
	ctx := context.Background()
	var pods []corev1.Pod
	eventually(t, waitShort, fmt.Sprintf("%d workers of pool %s", n, pool), func() (bool, string) {
		p := getPool(t, ns, pool)
		if p.Status.Revision == "" {
			return false, "no revision yet"
		}
		var list corev1.PodList
		if err := env.Client.List(ctx, &list, client.InNamespace(workerNS), client.MatchingLabels{
			shellv1alpha1.LabelPool: pool, shellv1alpha1.LabelRevision: p.Status.Revision}); err != nil {
			return false, err.Error()
		}
		pods = slices.DeleteFunc(list.Items, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil })
		return int32(len(pods)) == n, fmt.Sprintf("%d pods", len(pods))
	})
	for i := range pods {
		setPodReady(t, &pods[i])
	}
	slices.SortFunc(pods, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return pods
}

func setPodReady(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue,
		LastTransitionTime: metav1.Now()}}
	if err := env.Client.Status().Update(context.Background(), pod); err != nil {
		t.Fatalf("make pod %s ready: %v", pod.Name, err)
	}
}

func getPool(t *testing.T, ns, name string) *shellv1alpha1.ShellPool {
	t.Helper()
	p := &shellv1alpha1.ShellPool{}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, p); err != nil {
		t.Fatalf("get pool: %v", err)
	}
	return p
}

func getJob(t *testing.T, ns, name string) *shellv1alpha1.ShellJob {
	t.Helper()
	j := &shellv1alpha1.ShellJob{}
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, j); err != nil {
		t.Fatalf("get job: %v", err)
	}
	return j
}

func createJob(t *testing.T, w *utiltesting.ShellJobWrapper) *shellv1alpha1.ShellJob {
	t.Helper()
	j := w.Obj()
	if err := env.Client.Create(context.Background(), j); err != nil {
		t.Fatalf("create job %s: %v", j.Name, err)
	}
	return j
}

// waitPhase waits until the job reaches phase, and returns it.
func waitPhase(t *testing.T, ns, name string, phase shellv1alpha1.ShellJobPhase) *shellv1alpha1.ShellJob {
	t.Helper()
	var j *shellv1alpha1.ShellJob
	eventually(t, waitShort, fmt.Sprintf("job %s in phase %s", name, phase), func() (bool, string) {
		j = getJob(t, ns, name)
		return j.Status.Phase == phase, fmt.Sprintf("phase %q, conditions %v", j.Status.Phase, j.Status.Conditions)
	})
	return j
}

// eventReasons lists the reasons of the Events about an object, oldest
// first.
func eventReasons(t *testing.T, ns, name string) []string {
	t.Helper()
	var list eventsv1.EventList
	if err := env.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatalf("list events: %v", err)
	}
	slices.SortStableFunc(list.Items, func(a, b eventsv1.Event) int { return a.EventTime.Compare(b.EventTime.Time) })
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Name == name {
			out = append(out, e.Reason)
		}
	}
	return out
}

// waitEvents waits until the object's Events include every reason given.
func waitEvents(t *testing.T, ns, name string, reasons ...string) {
	t.Helper()
	eventually(t, waitShort, fmt.Sprintf("events %v of %s", reasons, name), func() (bool, string) {
		got := eventReasons(t, ns, name)
		for _, r := range reasons {
			if !slices.Contains(got, r) {
				return false, fmt.Sprint(got)
			}
		}
		return true, ""
	})
}

// podKey is the key of a job's worker pod.
func podKey(j *shellv1alpha1.ShellJob) types.NamespacedName {
	return types.NamespacedName{Namespace: j.Namespace, Name: j.Status.Pod}
}
