package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/shelljob"
	utiltesting "shelljob.dev/shelljob/internal/testing"
	"shelljob.dev/shelljob/internal/texts"
)

// runningOf lists the jobs of names that run, in order.
func runningOf(t *testing.T, ns string, names ...string) []string {
	t.Helper()
	var out []string
	for _, n := range names {
		if getJob(t, ns, n).Status.Phase == shellv1alpha1.PhaseRunning {
			out = append(out, n)
		}
	}
	return out
}

// waitRunning waits until exactly want of names run.
func waitRunning(t *testing.T, ns string, names []string, want ...string) {
	t.Helper()
	eventually(t, waitShort, fmt.Sprintf("%v running", want), func() (bool, string) {
		got := runningOf(t, ns, names...)
		return slices.Equal(got, want), fmt.Sprint(got)
	})
}

// TestMaxRunningPerUser: with maxRunningPerUser 2 on a 4-worker pool,
// alice's five jobs run two at a time, oldest first, while bob's run
// beside them; a waiting job says why, and a Direct job of alice waits
// too.
func TestMaxRunningPerUser(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	agent := newFakeAgent()
	startOperator(t, ns, agent)
	pool := utiltesting.MakeShellPool("dev", ns).Replicas(4).MaxRunningPerUser(2).Obj()
	if err := env.Client.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	markWorkersReady(t, ns, "dev", 4)

	alice := []string{"a1", "a2", "a3", "a4", "a5"}
	for _, n := range alice {
		createJob(t, utiltesting.MakeShellJob(n, ns).Pool("dev").User("alice").Command("sleep 100"))
	}
	bob := []string{"b1", "b2"}
	for _, n := range bob {
		createJob(t, utiltesting.MakeShellJob(n, ns).Pool("dev").User("bob").Command("sleep 100"))
	}
	waitRunning(t, ns, alice, "a1", "a2")
	waitRunning(t, ns, bob, "b1", "b2")
	for _, n := range alice[2:] {
		eventually(t, waitShort, n+" waiting for alice's jobs", func() (bool, string) {
			j := getJob(t, ns, n)
			c := meta.FindStatusCondition(j.Status.Conditions, shellv1alpha1.ShellJobScheduled)
			if c == nil {
				return false, "no Scheduled condition"
			}
			running, ok := texts.RunningOfUser(j)
			return c.Reason == shellv1alpha1.ShellJobScheduledReasonMaxRunningPerUser && ok && running == 2 &&
				j.Status.Phase == shellv1alpha1.PhaseQueued, fmt.Sprintf("%s %s: %s", j.Status.Phase, c.Reason, c.Message)
		})
	}
	// a1's end frees a worker and a seat of alice's: her oldest waiting
	// job, a3, takes them.
	end := func(name string) {
		j := getJob(t, ns, name)
		agent.exit(podKey(j), string(j.UID), 0)
		waitPhase(t, ns, name, shellv1alpha1.PhaseSucceeded)
	}
	end("a1")
	waitRunning(t, ns, alice, "a2", "a3")
	// A Direct job never waits for a free worker, but waits for alice's.
	createJob(t, utiltesting.MakeShellJob("a6-direct", ns).Pool("dev").User("alice").Mode(shellv1alpha1.ModeDirect).Command("sleep 100"))
	eventually(t, waitShort, "alice's Direct job waiting", func() (bool, string) {
		j := getJob(t, ns, "a6-direct")
		_, ok := texts.RunningOfUser(j)
		return ok && !j.Status.Ran, fmt.Sprint(j.Status.Conditions)
	})
	// A worker of bob's comes free: alice's jobs still wait, for her own,
	// and bob's next job takes it.
	end("b1")
	createJob(t, utiltesting.MakeShellJob("b3", ns).Pool("dev").User("bob").Command("sleep 100"))
	waitRunning(t, ns, append(bob, "b3"), "b2", "b3")
	waitRunning(t, ns, alice, "a2", "a3")
	end("a2")
	end("a3")
	waitRunning(t, ns, append(alice, "a6-direct"), "a4", "a5")
	end("a4")
	waitRunning(t, ns, append(alice, "a6-direct"), "a5", "a6-direct")
	for _, n := range []string{"a5", "a6-direct", "b2", "b3"} {
		end(n)
	}
	// Each job started once.
	starts := 0
	for _, c := range agent.callLog() {
		if strings.HasPrefix(c, "start ") {
			starts++
		}
	}
	if starts != 9 {
		t.Errorf("%d starts, want 9", starts)
	}
}

// eventNote waits for an Event of reason about the object, and returns its
// note.
func eventNote(t *testing.T, ns, name, reason string) string {
	t.Helper()
	var note string
	eventually(t, waitShort, fmt.Sprintf("a %s Event of %s", reason, name), func() (bool, string) {
		var list eventsv1.EventList
		if err := env.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		for _, e := range list.Items {
			if e.Regarding.Name == name && e.Reason == reason {
				note = e.Note
				return true, ""
			}
		}
		return false, fmt.Sprint(eventReasons(t, ns, name))
	})
	return note
}

// decide records a decision on a job's approval, as the policies let a
// person who may approve on its pool do.
func decide(t *testing.T, ns, name string, d shellv1alpha1.ApprovalDecision, by string) {
	t.Helper()
	j := getJob(t, ns, name)
	patch := client.MergeFrom(j.DeepCopy())
	j.Spec.Approval = &shellv1alpha1.ShellJobApproval{Decision: d, By: by}
	if err := env.Client.Patch(context.Background(), j, patch); err != nil {
		t.Fatal(err)
	}
}

// neverStarted checks that the agent never saw the job.
func neverStarted(t *testing.T, agent *fakeAgent, j *shellv1alpha1.ShellJob) {
	t.Helper()
	for _, c := range agent.callLog() {
		if strings.Contains(c, string(j.UID)) {
			t.Errorf("%s reached the agent: %s", j.Name, c)
		}
	}
}

// TestApproval: on a pool that requires approval, a job waits, unplaced,
// in AwaitingApproval; once approved it runs as any other; denied, or not
// decided within the pool's timeout, it ends without running; stopped
// while it waits, it ends as a queued job does. Events say who did what.
func TestApproval(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	agent := newFakeAgent()
	startOperator(t, ns, agent)
	for _, p := range []*shellv1alpha1.ShellPool{
		utiltesting.MakeShellPool("prod", ns).Replicas(2).Approval(600).Obj(),
		utiltesting.MakeShellPool("hasty", ns).Replicas(1).Approval(1).Obj(),
	} {
		if err := env.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		markWorkersReady(t, ns, p.Name, p.Spec.Replicas)
	}
	for _, n := range []string{"approved", "denied", "stopped"} {
		createJob(t, utiltesting.MakeShellJob(n, ns).Pool("prod").User("bob").Command("sleep 100"))
	}
	for _, n := range []string{"approved", "denied", "stopped"} {
		j := waitPhase(t, ns, n, shellv1alpha1.PhaseAwaitingApproval)
		c := meta.FindStatusCondition(j.Status.Conditions, shellv1alpha1.ShellJobApproved)
		s := meta.FindStatusCondition(j.Status.Conditions, shellv1alpha1.ShellJobScheduled)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != shellv1alpha1.ShellJobApprovedReasonAwaitingApproval ||
			s == nil || s.Reason != shellv1alpha1.ShellJobScheduledReasonAwaitingApproval || j.Status.Pod != "" {
			t.Errorf("%s: Approved %+v, Scheduled %+v, pod %q; want it waiting for approval, unplaced", n, c, s, j.Status.Pod)
		}
		if !shelljob.IsAwaitingApproval(j) {
			t.Errorf("%s: not awaiting approval", n)
		}
	}
	if note := eventNote(t, ns, "approved", "Queued"); !strings.Contains(note, "created by bob") {
		t.Errorf("Queued Event %q names no creator", note)
	}
	eventNote(t, ns, "approved", "AwaitingApproval")

	decide(t, ns, "approved", shellv1alpha1.ApprovalApproved, "erin")
	j := waitPhase(t, ns, "approved", shellv1alpha1.PhaseRunning)
	if c := meta.FindStatusCondition(j.Status.Conditions, shellv1alpha1.ShellJobApproved); c == nil || c.Status != metav1.ConditionTrue || c.Message != "approved by erin" {
		t.Errorf("Approved %+v, want True, approved by erin", c)
	}
	if note := eventNote(t, ns, "approved", "Approved"); !strings.Contains(note, "approved by erin") {
		t.Errorf("Approved Event %q", note)
	}

	decide(t, ns, "denied", shellv1alpha1.ApprovalDenied, "erin")
	j = waitPhase(t, ns, "denied", shellv1alpha1.PhaseDenied)
	if e := shelljob.EndOf(j); j.Status.Ran || !e.NotApproved || texts.EndNote(e) != "⛔ Denied by erin." || j.Status.CompletionTime == nil {
		t.Errorf("denied: ran %v, end %+v, note %q", j.Status.Ran, e, texts.EndNote(e))
	}
	if note := eventNote(t, ns, "denied", shellv1alpha1.ShellJobFinishedReasonDenied); !strings.Contains(note, "denied by erin; it never ran") {
		t.Errorf("Denied Event %q", note)
	}

	stopJob(t, ns, "stopped", shellv1alpha1.StopReasonUser)
	j = waitPhase(t, ns, "stopped", shellv1alpha1.PhaseStopped)
	if c := finished(j); j.Status.Ran || c == nil || c.Reason != shellv1alpha1.ShellJobFinishedReasonStoppedBeforeRun ||
		meta.FindStatusCondition(j.Status.Conditions, shellv1alpha1.ShellJobApproved) != nil {
		t.Errorf("stopped while awaiting: ran %v, conditions %+v", j.Status.Ran, j.Status.Conditions)
	}

	createJob(t, utiltesting.MakeShellJob("expired", ns).Pool("hasty").User("bob").Command("sleep 100"))
	// Its second of AwaitingApproval can pass between two looks of a
	// loaded machine: its Scheduled condition keeps why it waited.
	j = waitPhase(t, ns, "expired", shellv1alpha1.PhaseExpired)
	if e := shelljob.EndOf(j); j.Status.Ran || texts.EndNote(e) != "⌛ Not approved within 1 s: it never ran." {
		t.Errorf("expired: ran %v, note %q", j.Status.Ran, texts.EndNote(e))
	}
	if c := meta.FindStatusCondition(j.Status.Conditions, shellv1alpha1.ShellJobScheduled); c == nil || c.Reason != shellv1alpha1.ShellJobApprovedReasonAwaitingApproval {
		t.Errorf("expired: Scheduled condition %+v, want it waiting for approval", c)
	}
	eventNote(t, ns, "expired", shellv1alpha1.ShellJobFinishedReasonApprovalExpired)
	// A decision after the end changes nothing.
	decide(t, ns, "expired", shellv1alpha1.ApprovalApproved, "erin")

	approved := getJob(t, ns, "approved")
	agent.exit(podKey(approved), string(approved.UID), 0)
	waitPhase(t, ns, "approved", shellv1alpha1.PhaseSucceeded)
	time.Sleep(200 * time.Millisecond)
	for _, n := range []string{"denied", "stopped", "expired"} {
		j := getJob(t, ns, n)
		neverStarted(t, agent, j)
		if shelljob.Phase(j) == shellv1alpha1.PhaseRunning || j.Status.Pod != "" {
			t.Errorf("%s ran: %+v", n, j.Status)
		}
	}
}

// TestStopBySomeoneElse: a stop that names its stopper (spec.stopBy, which
// the admission policies check) names them in the operator's Events and in
// the job's end.
func TestStopBySomeoneElse(t *testing.T) {
	ns := namespace(t)
	agent := newFakeAgent()
	startOperator(t, ns, agent)
	readyPool(t, ns, "shell", 2)
	createJob(t, utiltesting.MakeShellJob("running", ns).User("alice").Command("sleep 100"))
	createJob(t, utiltesting.MakeShellJob("busy", ns).User("alice").Command("sleep 100"))
	waitPhase(t, ns, "running", shellv1alpha1.PhaseRunning)
	waitPhase(t, ns, "busy", shellv1alpha1.PhaseRunning)
	createJob(t, utiltesting.MakeShellJob("queued", ns).User("alice").Command("sleep 100"))
	eventually(t, waitShort, "queued waiting", func() (bool, string) {
		j := getJob(t, ns, "queued")
		return shelljob.IsWaiting(j), fmt.Sprint(j.Status.Conditions)
	})

	for _, n := range []string{"running", "queued"} {
		j := getJob(t, ns, n)
		patch := client.MergeFrom(j.DeepCopy())
		j.Spec.Stop, j.Spec.StopReason, j.Spec.StopBy = true, shellv1alpha1.StopReasonUser, "bob"
		if err := env.Client.Patch(context.Background(), j, patch); err != nil {
			t.Fatal(err)
		}
	}
	if note := eventNote(t, ns, "running", "Signal"); !strings.Contains(note, "stopping by bob (User): sent SIGINT") {
		t.Errorf("Signal Event %q", note)
	}
	j := waitPhase(t, ns, "running", shellv1alpha1.PhaseStopped)
	if c := finished(j); c == nil || !strings.HasPrefix(c.Message, "stopped by bob (User) after SIGINT") {
		t.Errorf("Finished %+v", c)
	}
	if e := shelljob.EndOf(j); e.StopBy != "bob" || texts.StoppedByNote(e.StopBy, e.ExitCode) != "⏹ Stopped by bob (exit 130)." {
		t.Errorf("end %+v", e)
	}
	waitPhase(t, ns, "queued", shellv1alpha1.PhaseStopped)
	if note := eventNote(t, ns, "queued", shellv1alpha1.ShellJobFinishedReasonStoppedBeforeRun); !strings.Contains(note, "Stopped by bob before it ran (User)") {
		t.Errorf("StoppedBeforeRun Event %q", note)
	}
}
