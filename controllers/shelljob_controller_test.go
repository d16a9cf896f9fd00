package controllers

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

func finished(j *shellv1alpha1.ShellJob) *metav1.Condition {
	return meta.FindStatusCondition(j.Status.Conditions, shellv1alpha1.ShellJobFinished)
}

func TestJobSucceeds(t *testing.T) {
	ns := namespace(t)
	agent := newFakeAgent()
	startOperator(t, ns, agent)
	readyPool(t, ns, "shell", 2)

	createJob(t, utiltesting.MakeShellJob("hi", ns).Command("echo hi\necho more"))
	j := waitPhase(t, ns, "hi", shellv1alpha1.PhaseSucceeded)
	if j.Status.Number != 1 || j.Status.Summary != "echo hi…" {
		t.Errorf("number %d, summary %q", j.Status.Number, j.Status.Summary)
	}
	if !j.Status.Ran || j.Status.PGID == 0 || j.Status.StartTime == nil || j.Status.CompletionTime == nil {
		t.Errorf("status %+v: want ran, pgid, start and completion times", j.Status)
	}
	if ptr.Deref(j.Status.ExitCode, -1) != 0 || j.Status.OutputBytes == 0 {
		t.Errorf("exit %v, output bytes %d", j.Status.ExitCode, j.Status.OutputBytes)
	}
	if j.Status.Files != nil {
		t.Errorf("files %+v from an agent that does not count them, want none recorded", j.Status.Files)
	}
	if c := finished(j); c == nil || c.Reason != shellv1alpha1.ShellJobFinishedReasonExited || c.Message != "exit 0" {
		t.Errorf("Finished condition %+v", c)
	}
	if !strings.HasPrefix(j.Status.Pod, "shell-"+j.Status.Revision+"-") {
		t.Errorf("pod %s, revision %s", j.Status.Pod, j.Status.Revision)
	}
	// The finalizer goes on with the write after the Start, and off at the
	// end.
	eventually(t, waitShort, "the finalizer removed", func() (bool, string) {
		j = getJob(t, ns, "hi")
		return !slices.Contains(j.Finalizers, JobFinalizer), fmt.Sprint(j.Finalizers)
	})
	waitEvents(t, ns, "hi", "Queued", "Scheduled", "Started", "Succeeded")
}

func TestJobFails(t *testing.T) {
	ns := namespace(t)
	startOperator(t, ns, newFakeAgent())
	readyPool(t, ns, "shell", 1)
	createJob(t, utiltesting.MakeShellJob("three", ns).Command("exit 3"))
	j := waitPhase(t, ns, "three", shellv1alpha1.PhaseFailed)
	if ptr.Deref(j.Status.ExitCode, -1) != 3 {
		t.Errorf("exit %v, want 3", j.Status.ExitCode)
	}
	if c := finished(j); c == nil || c.Reason != shellv1alpha1.ShellJobFinishedReasonExited || c.Message != "exit 3" {
		t.Errorf("Finished condition %+v", c)
	}
	waitEvents(t, ns, "three", "Failed")
}

func TestJobPoolNotFound(t *testing.T) {
	ns := namespace(t)
	startOperator(t, ns, newFakeAgent())
	createJob(t, utiltesting.MakeShellJob("j", ns).Pool("nope"))
	eventually(t, waitShort, "PoolNotFound", func() (bool, string) {
		j := getJob(t, ns, "j")
		c := meta.FindStatusCondition(j.Status.Conditions, shellv1alpha1.ShellJobScheduled)
		return c != nil && c.Reason == shellv1alpha1.ShellJobScheduledReasonPoolNotFound && j.Status.Phase == shellv1alpha1.PhaseQueued,
			fmt.Sprintf("%+v", j.Status)
	})
	// The pool comes: the job runs.
	readyPool(t, ns, "nope", 1)
	waitPhase(t, ns, "j", shellv1alpha1.PhaseSucceeded)
}

// TestNumbers: numbers are unique and increasing, also across a restart
// of the operator, and the counter lives in a ConfigMap.
func TestNumbers(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	agent := newFakeAgent()
	op := startOperator(t, ns, agent)
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Go(func() {
			j := utiltesting.MakeShellJob(fmt.Sprintf("j%02d", i), ns).Pool("none").Obj()
			if err := env.Client.Create(ctx, j); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	numbers := func() []int64 {
		var list shellv1alpha1.ShellJobList
		if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		var out []int64
		for _, j := range list.Items {
			out = append(out, j.Status.Number)
		}
		slices.Sort(out)
		return out
	}
	eventually(t, waitShort, "10 numbered jobs", func() (bool, string) {
		got := numbers()
		return !slices.Contains(got, 0), fmt.Sprint(got)
	})
	if diff := cmp.Diff([]int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, numbers()); diff != "" {
		t.Errorf("numbers (-want +got):\n%s", diff)
	}
	var cm corev1.ConfigMap
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: CounterConfigMap}, &cm); err != nil {
		t.Fatal(err)
	}
	// Each counter update took the jobs that waited, and minNumberBlock
	// at least.
	next, err := strconv.ParseInt(cm.Data[CounterKey], 10, 64)
	if err != nil || next < 11 || next > 10+minNumberBlock {
		t.Errorf("counter %q, want 11 to %d", cm.Data[CounterKey], 10+minNumberBlock)
	}

	// A restarted operator goes on from the counter: the numbers the last
	// one took and gave no job are a gap.
	op.stop()
	op = startOperator(t, ns, agent)
	createJob(t, utiltesting.MakeShellJob("after", ns).Pool("none"))
	eventually(t, waitShort, fmt.Sprintf("#%d after a restart", next), func() (bool, string) {
		n := getJob(t, ns, "after").Status.Number
		return n == next, fmt.Sprint(n)
	})

	// A lost counter starts again above every number in use, once the
	// operator holds none of its numbers.
	op.stop()
	startOperator(t, ns, agent)
	if err := env.Client.Delete(ctx, &cm); err != nil {
		t.Fatal(err)
	}
	createJob(t, utiltesting.MakeShellJob("lost", ns).Pool("none"))
	eventually(t, waitShort, fmt.Sprintf("#%d after the counter was lost", next+1), func() (bool, string) {
		n := getJob(t, ns, "lost").Status.Number
		return n == next+1, fmt.Sprint(n)
	})
}

// TestFIFO: 12 jobs on a 3-worker pool start in the order they were
// created, and all finish.
func TestFIFO(t *testing.T) {
	ns := namespace(t)
	agent := newFakeAgent()
	startOperator(t, ns, agent)
	readyPool(t, ns, "shell", 3)
	const n = 12
	for i := range n {
		createJob(t, utiltesting.MakeShellJob(fmt.Sprintf("job-%02d", i), ns).Command("sleep 100"))
	}
	started := []string{}
	for len(started) < n {
		// Let the pool fill, check that exactly the oldest waiting jobs run,
		// then end them.
		var running []*shellv1alpha1.ShellJob
		want := min(3, n-len(started))
		eventually(t, waitShort, fmt.Sprintf("%d running after %d", want, len(started)), func() (bool, string) {
			running = nil
			for i := len(started); i < n; i++ {
				j := getJob(t, ns, fmt.Sprintf("job-%02d", i))
				if j.Status.Phase == shellv1alpha1.PhaseRunning {
					running = append(running, j)
				}
			}
			return len(running) == want, fmt.Sprintf("%d running", len(running))
		})
		for i, j := range running {
			if wantName := fmt.Sprintf("job-%02d", len(started)+i); j.Name != wantName {
				t.Fatalf("running %s, want %s: not FIFO", j.Name, wantName)
			}
		}
		for _, j := range running {
			started = append(started, j.Name)
			agent.exit(podKey(j), string(j.UID), 0)
			waitPhase(t, ns, j.Name, shellv1alpha1.PhaseSucceeded)
		}
	}
	// Each worker ran one job at a time: the fake agent saw 12 starts.
	starts := 0
	for _, c := range agent.callLog() {
		if strings.HasPrefix(c, "start ") {
			starts++
		}
	}
	if starts != n {
		t.Errorf("%d starts, want %d", starts, n)
	}
}

// TestModes: Stateful waits for the stateful worker while others are
// free, Fork spares it, and Direct runs while every worker is busy.
func TestModes(t *testing.T) {
	ns := namespace(t)
	agent := newFakeAgent()
	startOperator(t, ns, agent)
	readyPool(t, ns, "shell", 2)
	rev := getPool(t, ns, "shell").Status.Revision
	stateful := fmt.Sprintf("shell-%s-0", rev)

	createJob(t, utiltesting.MakeShellJob("s1", ns).Mode(shellv1alpha1.ModeStateful).Command("cd /tmp; sleep 100"))
	s1 := waitPhase(t, ns, "s1", shellv1alpha1.PhaseRunning)
	if s1.Status.Pod != stateful {
		t.Errorf("stateful job on %s, want %s", s1.Status.Pod, stateful)
	}
	createJob(t, utiltesting.MakeShellJob("s2", ns).Mode(shellv1alpha1.ModeStateful).Command("pwd"))
	eventually(t, waitShort, "s2 waits for the stateful worker", func() (bool, string) {
		j := getJob(t, ns, "s2")
		c := meta.FindStatusCondition(j.Status.Conditions, shellv1alpha1.ShellJobScheduled)
		return c != nil && c.Reason == shellv1alpha1.ShellJobScheduledReasonStatefulWorkerBusy, fmt.Sprintf("%+v", c)
	})
	createJob(t, utiltesting.MakeShellJob("f", ns).Command("sleep 100"))
	f := waitPhase(t, ns, "f", shellv1alpha1.PhaseRunning)
	if f.Status.Pod == stateful {
		t.Errorf("fork job took the stateful worker while another was free")
	}
	createJob(t, utiltesting.MakeShellJob("d", ns).Mode(shellv1alpha1.ModeDirect).Command("sleep 100"))
	waitPhase(t, ns, "d", shellv1alpha1.PhaseRunning)

	agent.exit(podKey(s1), string(s1.UID), 0)
	s2 := waitPhase(t, ns, "s2", shellv1alpha1.PhaseSucceeded)
	if s2.Status.Pod != stateful {
		t.Errorf("s2 ran on %s, want %s", s2.Status.Pod, stateful)
	}
	agent.mu.Lock()
	stat := agent.pod(podKey(s2)).jobs[string(s2.UID)].req
	agent.mu.Unlock()
	if !stat.Stateful || stat.Shell != "zsh" {
		t.Errorf("start request %+v: want stateful, zsh", stat)
	}
}

// TestPreferredWorker: a Fork job goes to the worker its client prefers
// while that worker is free, and where the scheduler would put it when
// not.
func TestPreferredWorker(t *testing.T) {
	ns := namespace(t)
	startOperator(t, ns, newFakeAgent())
	readyPool(t, ns, "shell", 3)
	rev := getPool(t, ns, "shell").Status.Revision
	worker := func(i int) string { return fmt.Sprintf("shell-%s-%d", rev, i) }
	prefer := func(name string, i int) *utiltesting.ShellJobWrapper {
		return utiltesting.MakeShellJob(name, ns).Command("sleep 100").
			Annotation(shellv1alpha1.AnnotationPreferredWorker, worker(i))
	}

	createJob(t, prefer("a", 2))
	if j := waitPhase(t, ns, "a", shellv1alpha1.PhaseRunning); j.Status.Pod != worker(2) {
		t.Errorf("a ran on %s, want the worker it prefers, %s", j.Status.Pod, worker(2))
	}
	createJob(t, prefer("b", 2))
	if j := waitPhase(t, ns, "b", shellv1alpha1.PhaseRunning); j.Status.Pod != worker(1) {
		t.Errorf("b ran on %s, want %s: the worker it prefers is busy", j.Status.Pod, worker(1))
	}
}

func TestStopQueued(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	agent := newFakeAgent()
	startOperator(t, ns, agent)
	readyPool(t, ns, "shell", 1)
	createJob(t, utiltesting.MakeShellJob("busy", ns).Command("sleep 100"))
	waitPhase(t, ns, "busy", shellv1alpha1.PhaseRunning)
	createJob(t, utiltesting.MakeShellJob("waiting", ns).Command("echo never"))
	eventually(t, waitShort, "waiting job numbered", func() (bool, string) {
		j := getJob(t, ns, "waiting")
		return j.Status.Number != 0, ""
	})
	j := getJob(t, ns, "waiting")
	j.Spec.Stop = true
	if err := env.Client.Update(ctx, j); err != nil {
		t.Fatal(err)
	}
	j = waitPhase(t, ns, "waiting", shellv1alpha1.PhaseStopped)
	if j.Status.Ran || j.Status.Pod != "" || j.Status.StopReason != shellv1alpha1.StopReasonUser || j.Status.CompletionTime == nil {
		t.Errorf("status %+v: want not ran, no pod, reason User, a completion time", j.Status)
	}
	if c := finished(j); c == nil || c.Reason != shellv1alpha1.ShellJobFinishedReasonStoppedBeforeRun {
		t.Errorf("Finished %+v, want StoppedBeforeRun", c)
	}
	// The busy job ends; the stopped one never runs.
	busy := getJob(t, ns, "busy")
	agent.exit(podKey(busy), string(busy.UID), 0)
	waitPhase(t, ns, "busy", shellv1alpha1.PhaseSucceeded)
	time.Sleep(200 * time.Millisecond)
	for _, c := range agent.callLog() {
		if strings.Contains(c, string(j.UID)) {
			t.Errorf("the stopped job reached the agent: %s", c)
		}
	}
	waitEvents(t, ns, "waiting", "StoppedBeforeRun")
}

// stopJob sets spec.stop on a job, as .k does.
func stopJob(t *testing.T, ns, name string, reason shellv1alpha1.StopReason) {
	t.Helper()
	j := getJob(t, ns, name)
	patch := client.MergeFrom(j.DeepCopy())
	j.Spec.Stop, j.Spec.StopReason = true, reason
	if err := env.Client.Patch(context.Background(), j, patch); err != nil {
		t.Fatal(err)
	}
}

func TestStopRunning(t *testing.T) {
	ns := namespace(t)
	agent := newFakeAgent()
	startOperator(t, ns, agent)
	readyPool(t, ns, "shell", 2)

	createJob(t, utiltesting.MakeShellJob("sleep", ns).Command("sleep 100"))
	createJob(t, utiltesting.MakeShellJob("trap", ns).Command("trap '' INT; sleep 100"))
	waitPhase(t, ns, "sleep", shellv1alpha1.PhaseRunning)
	waitPhase(t, ns, "trap", shellv1alpha1.PhaseRunning)

	stopJob(t, ns, "sleep", "")
	j := waitPhase(t, ns, "sleep", shellv1alpha1.PhaseStopped)
	if ptr.Deref(j.Status.ExitCode, -1) != 130 || len(j.Status.StopSteps) != 1 || j.Status.StopSteps[0].Signal != shellv1alpha1.SIGINT {
		t.Errorf("exit %v, steps %+v: want 130 after SIGINT", j.Status.ExitCode, j.Status.StopSteps)
	}
	if c := finished(j); c == nil || c.Reason != shellv1alpha1.ShellJobFinishedReasonStopped || j.Status.StopReason != shellv1alpha1.StopReasonUser {
		t.Errorf("Finished %+v, stop reason %q", c, j.Status.StopReason)
	}

	stopped := time.Now()
	stopJob(t, ns, "trap", shellv1alpha1.StopReasonShutdown)
	waitPhase(t, ns, "trap", shellv1alpha1.PhaseStopping)
	j = waitPhase(t, ns, "trap", shellv1alpha1.PhaseStopped)
	took := time.Since(stopped)
	if ptr.Deref(j.Status.ExitCode, -1) != 143 {
		t.Errorf("exit %v, want 143", j.Status.ExitCode)
	}
	var signals []shellv1alpha1.Signal
	for _, s := range j.Status.StopSteps {
		signals = append(signals, s.Signal)
	}
	if diff := cmp.Diff([]shellv1alpha1.Signal{shellv1alpha1.SIGINT, shellv1alpha1.SIGTERM}, signals); diff != "" {
		t.Errorf("signals (-want +got):\n%s", diff)
	}
	if took < testStopGrace {
		t.Errorf("SIGTERM came %v after the stop, before the grace of %v", took, testStopGrace)
	}
	if j.Status.StopReason != shellv1alpha1.StopReasonShutdown {
		t.Errorf("stop reason %q", j.Status.StopReason)
	}
	waitEvents(t, ns, "trap", "Signal", "Stopped")
}

// TestStopEscalatesToKill: a command that ignores SIGINT and SIGTERM gets
// SIGKILL two graces after the stop.
func TestStopEscalatesToKill(t *testing.T) {
	ns := namespace(t)
	startOperator(t, ns, newFakeAgent())
	readyPool(t, ns, "shell", 1)
	createJob(t, utiltesting.MakeShellJob("stubborn", ns).Command("trap '' INT TERM; sleep 100"))
	waitPhase(t, ns, "stubborn", shellv1alpha1.PhaseRunning)
	stopJob(t, ns, "stubborn", "")
	j := waitPhase(t, ns, "stubborn", shellv1alpha1.PhaseStopped)
	var signals []shellv1alpha1.Signal
	for _, s := range j.Status.StopSteps {
		signals = append(signals, s.Signal)
	}
	want := []shellv1alpha1.Signal{shellv1alpha1.SIGINT, shellv1alpha1.SIGTERM, shellv1alpha1.SIGKILL}
	if diff := cmp.Diff(want, signals); diff != "" {
		t.Errorf("signals (-want +got):\n%s", diff)
	}
	if ptr.Deref(j.Status.ExitCode, -1) != 137 {
		t.Errorf("exit %v, want 137", j.Status.ExitCode)
	}
}

func TestHold(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	agent := newFakeAgent()
	startOperator(t, ns, agent)
	readyPool(t, ns, "shell", 1)
	createJob(t, utiltesting.MakeShellJob("held", ns).Command("echo files").Hold())
	eventually(t, waitShort, "held job assigned", func() (bool, string) {
		j := getJob(t, ns, "held")
		return j.Status.Pod != "", fmt.Sprintf("%+v", j.Status)
	})
	time.Sleep(200 * time.Millisecond)
	j := getJob(t, ns, "held")
	if j.Status.Ran || j.Status.Phase != shellv1alpha1.PhaseQueued || len(agent.callLog()) != 0 {
		t.Fatalf("held job started: %+v, calls %v", j.Status, agent.callLog())
	}
	j.Spec.Hold = false
	if err := env.Client.Update(ctx, j); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, ns, "held", shellv1alpha1.PhaseSucceeded)
}

// TestHoldTimeout: a job its client never releases (a bot that restarted
// between its create and the release) fails once held longer than the
// hold timeout, with a reason, a message and an event; it never runs.
func TestHoldTimeout(t *testing.T) {
	const timeout = 2 * time.Second
	ns := namespace(t)
	agent := newFakeAgent()
	startOperatorWith(t, ns, Options{Agent: agent, StopGrace: testStopGrace, HoldTimeout: timeout})
	readyPool(t, ns, "shell", 1)
	createJob(t, utiltesting.MakeShellJob("held", ns).Command("echo files").Hold())
	j := waitPhase(t, ns, "held", shellv1alpha1.PhaseFailed)
	c := meta.FindStatusCondition(j.Status.Conditions, shellv1alpha1.ShellJobFinished)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != shellv1alpha1.ShellJobFinishedReasonHoldTimedOut ||
		!strings.Contains(c.Message, "held on worker") || !strings.Contains(c.Message, timeout.String()) {
		t.Errorf("Finished condition = %+v", c)
	}
	if held := j.Status.CompletionTime.Sub(scheduledAt(j).Truncate(time.Second)); held < timeout-time.Second {
		t.Errorf("failed %v after it was placed, before its hold timeout %v", held, timeout)
	}
	if j.Status.Ran || len(agent.callLog()) != 0 {
		t.Errorf("a held job ran: %+v, calls %v", j.Status, agent.callLog())
	}
	waitEvents(t, ns, "held", shellv1alpha1.ShellJobFinishedReasonHoldTimedOut)
}

func TestWorkerLost(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	agent := newFakeAgent()
	startOperator(t, ns, agent)
	readyPool(t, ns, "shell", 2)
	createJob(t, utiltesting.MakeShellJob("lost", ns).Command("sleep 100"))
	j := waitPhase(t, ns, "lost", shellv1alpha1.PhaseRunning)
	pod := &corev1.Pod{}
	if err := env.Client.Get(ctx, podKey(j), pod); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	j = waitPhase(t, ns, "lost", shellv1alpha1.PhaseFailed)
	c := finished(j)
	if c == nil || c.Reason != shellv1alpha1.ShellJobFinishedReasonWorkerLost ||
		c.Message != fmt.Sprintf("worker %s was deleted while the command ran", pod.Name) {
		t.Errorf("Finished %+v", c)
	}
	waitEvents(t, ns, "lost", "WorkerLost")
	// The pool makes the worker again.
	eventually(t, waitShort, "worker made again", func() (bool, string) {
		var p corev1.Pod
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), &p)
		return err == nil && p.UID != pod.UID, fmt.Sprint(err)
	})
}

// TestOperatorRestart: jobs that end while the operator is down end
// correctly once it is back, from the agents' replay; a stop that was
// under way goes on.
func TestOperatorRestart(t *testing.T) {
	ns := namespace(t)
	agent := newFakeAgent()
	op := startOperator(t, ns, agent)
	readyPool(t, ns, "shell", 3)
	createJob(t, utiltesting.MakeShellJob("a", ns).Command("sleep 100"))
	createJob(t, utiltesting.MakeShellJob("b", ns).Command("sleep 100"))
	createJob(t, utiltesting.MakeShellJob("c", ns).Command("trap '' INT; sleep 100"))
	a := waitPhase(t, ns, "a", shellv1alpha1.PhaseRunning)
	waitPhase(t, ns, "b", shellv1alpha1.PhaseRunning)
	waitPhase(t, ns, "c", shellv1alpha1.PhaseRunning)
	stopJob(t, ns, "c", "")
	waitPhase(t, ns, "c", shellv1alpha1.PhaseStopping)

	op.stop()
	agent.exit(podKey(a), string(a.UID), 7)
	time.Sleep(50 * time.Millisecond)
	startOperator(t, ns, agent)

	a = waitPhase(t, ns, "a", shellv1alpha1.PhaseFailed)
	if ptr.Deref(a.Status.ExitCode, -1) != 7 {
		t.Errorf("a: exit %v, want 7", a.Status.ExitCode)
	}
	c := waitPhase(t, ns, "c", shellv1alpha1.PhaseStopped)
	if ptr.Deref(c.Status.ExitCode, -1) != 143 || len(c.Status.StopSteps) != 2 {
		t.Errorf("c: exit %d, steps %+v: want 143 after SIGINT and SIGTERM", ptr.Deref(c.Status.ExitCode, -1), c.Status.StopSteps)
	}
	b := getJob(t, ns, "b")
	if b.Status.Phase != shellv1alpha1.PhaseRunning {
		t.Errorf("b: phase %s, want Running", b.Status.Phase)
	}
	// A broken stream is opened again, and b's exit still arrives.
	agent.breakStreams(podKey(b))
	agent.exit(podKey(b), string(b.UID), 0)
	waitPhase(t, ns, "b", shellv1alpha1.PhaseSucceeded)
	// Nothing ran twice.
	starts := 0
	for _, call := range agent.callLog() {
		if strings.HasPrefix(call, "start ") {
			starts++
		}
	}
	if starts != 3 {
		t.Errorf("%d starts, want 3: %v", starts, agent.callLog())
	}
}

// TestShutdownMidStop: an operator told to stop while it signals a job
// lets that call answer and records it before it goes, and the next
// operator ends the job: the stop is neither lost nor half recorded.
func TestShutdownMidStop(t *testing.T) {
	cases := map[string]struct {
		command     string
		held        agentapi.Signal
		wantSignals []shellv1alpha1.Signal
		wantExit    int32
	}{
		"during SIGINT": {
			command: "sleep 100", held: agentapi.SIGINT,
			wantSignals: []shellv1alpha1.Signal{shellv1alpha1.SIGINT}, wantExit: 130,
		},
		"during SIGTERM": {
			command: "trap '' INT; sleep 100", held: agentapi.SIGTERM,
			wantSignals: []shellv1alpha1.Signal{shellv1alpha1.SIGINT, shellv1alpha1.SIGTERM}, wantExit: 143,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ns := namespace(t)
			agent := newFakeAgent()
			// The default grace: the next operator hears the exit from the
			// agent's replay well before a further signal is due.
			opts := Options{Agent: agent, StopGrace: agentapi.StopGrace}
			op := startOperatorWith(t, ns, opts)
			readyPool(t, ns, "shell", 1)
			createJob(t, utiltesting.MakeShellJob("job", ns).Command(tc.command))
			waitPhase(t, ns, "job", shellv1alpha1.PhaseRunning)

			hold := agent.holdSignal(tc.held)
			stopJob(t, ns, "job", "")
			select {
			case <-hold.arrived:
			case <-time.After(waitShort):
				t.Fatalf("no %s sent", tc.held)
			}
			// SIGTERM to the operator, its call under way.
			stopped := make(chan struct{})
			go func() {
				op.stop()
				close(stopped)
			}()
			time.Sleep(200 * time.Millisecond)
			close(hold.release)
			select {
			case <-stopped:
			case <-time.After(GracefulShutdownTimeout):
				t.Fatal("the operator did not stop")
			}
			j := getJob(t, ns, "job")
			checkWholeStatus(t, j)
			if j.Status.Phase != shellv1alpha1.PhaseStopping && j.Status.Phase != shellv1alpha1.PhaseStopped {
				t.Errorf("phase %s left by the stopped operator, want Stopping", j.Status.Phase)
			}
			if diff := cmp.Diff(tc.wantSignals, signalsOf(j)); diff != "" || j.Status.StopReason != shellv1alpha1.StopReasonUser {
				t.Errorf("the stopped operator recorded stop reason %q and signals (-want +got):\n%s", j.Status.StopReason, diff)
			}

			startOperatorWith(t, ns, opts)
			j = waitPhase(t, ns, "job", shellv1alpha1.PhaseStopped)
			checkWholeStatus(t, j)
			if c := finished(j); c == nil || c.Reason != shellv1alpha1.ShellJobFinishedReasonStopped || j.Status.StopReason != shellv1alpha1.StopReasonUser {
				t.Errorf("Finished %+v, stop reason %q: want Stopped by the user", c, j.Status.StopReason)
			}
			if ptr.Deref(j.Status.ExitCode, -1) != tc.wantExit {
				t.Errorf("exit %v, want %d", j.Status.ExitCode, tc.wantExit)
			}
			if diff := cmp.Diff(tc.wantSignals, signalsOf(j)); diff != "" {
				t.Errorf("signals (-want +got):\n%s", diff)
			}
			signals := 0
			for _, call := range agent.callLog() {
				if strings.HasPrefix(call, "signal ") {
					signals++
				}
			}
			if signals != len(tc.wantSignals) {
				t.Errorf("%d signal calls, want %d: %v", signals, len(tc.wantSignals), agent.callLog())
			}
		})
	}
}

// checkWholeStatus fails t if the job's status is half written: an ended
// job has its completion time and a True Finished condition, a running or
// stopping one neither, and a stopping one its stop reason and signals.
func checkWholeStatus(t *testing.T, j *shellv1alpha1.ShellJob) {
	t.Helper()
	s := j.Status
	ended := s.Phase == shellv1alpha1.PhaseSucceeded || s.Phase == shellv1alpha1.PhaseFailed || s.Phase == shellv1alpha1.PhaseStopped
	c := finished(j)
	switch {
	case ended && (s.CompletionTime == nil || c == nil || c.Status != metav1.ConditionTrue):
		t.Errorf("phase %s without its completion time (%v) or Finished condition (%+v)", s.Phase, s.CompletionTime, c)
	case !ended && (s.CompletionTime != nil || c != nil):
		t.Errorf("phase %s with completion time %v and Finished condition %+v", s.Phase, s.CompletionTime, c)
	case s.Phase == shellv1alpha1.PhaseStopping && (s.StopReason == "" || len(s.StopSteps) == 0):
		t.Errorf("Stopping with stop reason %q and steps %+v", s.StopReason, s.StopSteps)
	}
}

// signalsOf lists the signals the job's status records.
func signalsOf(j *shellv1alpha1.ShellJob) []shellv1alpha1.Signal {
	var out []shellv1alpha1.Signal
	for _, s := range j.Status.StopSteps {
		out = append(out, s.Signal)
	}
	return out
}

func TestTimeouts(t *testing.T) {
	ns := namespace(t)
	startOperator(t, ns, newFakeAgent())
	readyPool(t, ns, "shell", 2)
	deadline := utiltesting.MakeShellJob("deadline", ns).Command("sleep 100")
	deadline.Spec.ActiveDeadlineSeconds = ptr.To[int64](1)
	createJob(t, deadline)
	idle := utiltesting.MakeShellJob("idle", ns).Command("sleep 100")
	idle.Spec.IdleTimeoutSeconds = ptr.To[int64](1)
	createJob(t, idle)
	for _, name := range []string{"deadline", "idle"} {
		j := waitPhase(t, ns, name, shellv1alpha1.PhaseStopped)
		if j.Status.StopReason != shellv1alpha1.StopReasonTimeout || ptr.Deref(j.Status.ExitCode, -1) != 130 {
			t.Errorf("%s: stop reason %q, exit %v: want Timeout, 130", name, j.Status.StopReason, j.Status.ExitCode)
		}
		if j.Spec.Stop {
			t.Errorf("%s: the operator set spec.stop, a client's field", name)
		}
		waitEvents(t, ns, name, "Timeout", "Stopped")
	}
}

func TestTTL(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	startOperator(t, ns, newFakeAgent())
	readyPool(t, ns, "shell", 1)
	j := utiltesting.MakeShellJob("ttl", ns).Command("echo bye")
	j.Spec.TTLSecondsAfterFinished = ptr.To[int32](1)
	createJob(t, j)
	waitPhase(t, ns, "ttl", shellv1alpha1.PhaseSucceeded)
	eventually(t, waitShort, "job deleted after its TTL", func() (bool, string) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "ttl"}, &shellv1alpha1.ShellJob{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

// waitGone waits until the job is deleted.
func waitGone(t *testing.T, ns, name string) {
	t.Helper()
	eventually(t, waitShort, fmt.Sprintf("job %s deleted", name), func() (bool, string) {
		err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &shellv1alpha1.ShellJob{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

// TestDefaultTTL: a finished job that sets no TTL goes once the operator's
// has run out. A Telegram job, which the bot still has to deliver, is kept
// until it is marked delivered, and the TTL counts from then.
func TestDefaultTTL(t *testing.T) {
	const ttl = time.Second
	ns := namespace(t)
	startOperatorWith(t, ns, Options{Agent: newFakeAgent(), StopGrace: testStopGrace, JobTTL: ttl})
	readyPool(t, ns, "shell", 1)
	createJob(t, utiltesting.MakeShellJob("cli", ns).Command("echo bye"))
	waitPhase(t, ns, "cli", shellv1alpha1.PhaseSucceeded)
	waitGone(t, ns, "cli")

	createJob(t, utiltesting.MakeShellJob("chat", ns).Command("echo hi").
		Origin(shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginTelegram, User: "1", Chat: 1, Message: 2}))
	j := waitPhase(t, ns, "chat", shellv1alpha1.PhaseSucceeded)
	// The API keeps whole seconds: wait out the TTL from the recorded end,
	// and more.
	time.Sleep(time.Until(j.Status.CompletionTime.Add(ttl + 2*time.Second)))
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(j), j); err != nil {
		t.Fatalf("the job went before it was delivered: %v", err)
	}
	deliver(t, ns, "chat")
	waitGone(t, ns, "chat")
}

// TestDeleteRunning: a running job that is deleted is stopped first, and
// goes once its command has ended.
func TestDeleteRunning(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	agent := newFakeAgent()
	startOperator(t, ns, agent)
	readyPool(t, ns, "shell", 1)
	createJob(t, utiltesting.MakeShellJob("doomed", ns).Command("sleep 100"))
	j := waitPhase(t, ns, "doomed", shellv1alpha1.PhaseRunning)
	if err := env.Client.Delete(ctx, j); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitShort, "job gone", func() (bool, string) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(j), &shellv1alpha1.ShellJob{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	want := fmt.Sprintf("signal %s %s %s", j.Status.Pod, j.UID, agentapi.SIGINT)
	if !slices.Contains(agent.callLog(), want) {
		t.Errorf("calls %v: want %q", agent.callLog(), want)
	}
}

// TestDeleteBeforeFinalizer: a job deleted while its command starts,
// before the write that puts its finalizer on, has its command killed.
func TestDeleteBeforeFinalizer(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	agent := newFakeAgent()
	deleted := make(chan error, 1)
	agent.onStart = func(_ types.NamespacedName, _ agentapi.StartRequest) {
		j := &shellv1alpha1.ShellJob{}
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "early"}, j)
		if err == nil && len(j.Finalizers) > 0 {
			err = fmt.Errorf("finalizers %v before the start answered", j.Finalizers)
		}
		if err == nil {
			err = env.Client.Delete(ctx, j)
		}
		deleted <- err
	}
	startOperator(t, ns, agent)
	readyPool(t, ns, "shell", 1)
	j := createJob(t, utiltesting.MakeShellJob("early", ns).Command("sleep 100"))
	if err := <-deleted; err != nil {
		t.Fatal(err)
	}
	eventually(t, waitShort, "the command killed", func() (bool, string) {
		calls := agent.callLog()
		return slices.ContainsFunc(calls, func(c string) bool {
			return strings.HasPrefix(c, "signal ") && strings.HasSuffix(c, fmt.Sprintf(" %s %s", j.UID, agentapi.SIGKILL))
		}), fmt.Sprint(calls)
	})
	err := env.Client.Get(ctx, client.ObjectKeyFromObject(j), &shellv1alpha1.ShellJob{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("get the deleted job: %v, want NotFound", err)
	}
}

// TestRunningHeld: every version of a job that shows it running carries
// its finalizer, so a client that sees it running may delete it and know
// it is stopped first.
func TestRunningHeld(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), waitShort)
	defer cancel()
	ns := namespace(t)
	startOperator(t, ns, newFakeAgent())
	readyPool(t, ns, "shell", 1)
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(ctx, &shellv1alpha1.ShellJobList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	createJob(t, utiltesting.MakeShellJob("held", ns).Command("sleep 100"))
	for ev := range w.ResultChan() {
		j, ok := ev.Object.(*shellv1alpha1.ShellJob)
		if !ok || j.Status.Phase != shellv1alpha1.PhaseRunning {
			continue
		}
		if !slices.Contains(j.Finalizers, JobFinalizer) {
			t.Errorf("version %s shows the job running without its finalizer: %v", j.ResourceVersion, j.Finalizers)
		}
		return
	}
	t.Fatal("the watch ended before the job ran")
}

// TestFinalizerTakenOffStaysOff: the operator puts its finalizer on a
// job once; one a user took off a running job is not put back, so that a
// delete after it lets the job go.
func TestFinalizerTakenOffStaysOff(t *testing.T) {
	ns := namespace(t)
	startOperatorWith(t, ns, Options{Agent: newFakeAgent(), StopGrace: time.Minute})
	readyPool(t, ns, "shell", 1)
	createJob(t, utiltesting.MakeShellJob("let-go", ns).Command(ignoresTERM+"; sleep 100"))
	waitPhase(t, ns, "let-go", shellv1alpha1.PhaseRunning)
	j := getJob(t, ns, "let-go")
	from := j.DeepCopy()
	j.Finalizers = nil
	if err := env.Client.Patch(context.Background(), j, client.MergeFrom(from)); err != nil {
		t.Fatalf("take the finalizer off: %v", err)
	}
	// The stop's pass goes through the running job's reconcile.
	stopJob(t, ns, "let-go", "")
	if j := waitPhase(t, ns, "let-go", shellv1alpha1.PhaseStopping); len(j.Finalizers) != 0 {
		t.Fatalf("finalizers %v put back on a job a user took them off", j.Finalizers)
	}
}

func TestStartRetried(t *testing.T) {
	ns := namespace(t)
	agent := newFakeAgent()
	agent.failStarts(2)
	startOperator(t, ns, agent)
	readyPool(t, ns, "shell", 1)
	createJob(t, utiltesting.MakeShellJob("retry", ns).Command("echo ok"))
	waitPhase(t, ns, "retry", shellv1alpha1.PhaseSucceeded)
}

// TestAgentRestart: a job whose agent restarted under it, or whose spool
// the agent no longer has, ends as WorkerLost.
func TestAgentRestart(t *testing.T) {
	ns := namespace(t)
	agent := newFakeAgent()
	startOperator(t, ns, agent)
	readyPool(t, ns, "shell", 2)
	createJob(t, utiltesting.MakeShellJob("lost", ns).Command("sleep 100"))
	createJob(t, utiltesting.MakeShellJob("gone", ns).Command("sleep 100"))
	lost := waitPhase(t, ns, "lost", shellv1alpha1.PhaseRunning)
	gone := waitPhase(t, ns, "gone", shellv1alpha1.PhaseRunning)
	// The start times the API keeps are whole seconds: let the stream that
	// opens after the restart be later than both.
	time.Sleep(time.Second)

	agent.restart(podKey(lost))
	lost = waitPhase(t, ns, "lost", shellv1alpha1.PhaseFailed)
	if c := finished(lost); c == nil || c.Reason != shellv1alpha1.ShellJobFinishedReasonWorkerLost ||
		!strings.Contains(c.Message, "restarted while the command ran") {
		t.Errorf("lost: Finished %+v", c)
	}
	if lost.Status.ExitCode != nil {
		t.Errorf("lost: exit %d, want none", *lost.Status.ExitCode)
	}

	agent.restart(podKey(gone), string(gone.UID))
	gone = waitPhase(t, ns, "gone", shellv1alpha1.PhaseFailed)
	if c := finished(gone); c == nil || c.Reason != shellv1alpha1.ShellJobFinishedReasonWorkerLost ||
		!strings.Contains(c.Message, "no longer knows the job") {
		t.Errorf("gone: Finished %+v", c)
	}
}
