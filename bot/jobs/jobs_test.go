package jobs

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/shelljob"
)

func mk(name string, owner, chat int64, cmd int, guest string) *Job {
	return New(Info{Name: name, Owner: owner, Chat: chat, CommandMsg: cmd, Guest: guest, Created: time.Now()})
}

func TestVisible(t *testing.T) {
	r := NewRegistry()
	a := mk("a", 1, -100, 10, "")  // group job of admin 1
	b := mk("b", 2, -100, 11, "")  // group job of admin 2
	c := mk("c", 1, 1, 12, "")     // admin 1's private job
	g := mk("g", 1, 0, 0, "g-555") // admin 1's guest job
	h := mk("h", 2, 0, 0, "g-555") // admin 2's guest job, same guest chat
	for _, j := range []*Job{a, b, c, g, h} {
		r.Register(j)
	}
	names := func(js []*Job) string {
		s := ""
		for _, j := range js {
			s += j.Name
		}
		return s
	}
	if got := names(r.Visible(-100, 1, "")); got != "ab" {
		t.Errorf("group: %q", got)
	}
	if got := names(r.Visible(1, 1, "")); got != "cg" {
		t.Errorf("private: %q", got)
	}
	if got := names(r.Visible(2, 2, "")); got != "h" {
		t.Errorf("private of 2: %q", got)
	}
	if got := names(r.Visible(0, 1, "g-555")); got != "g" {
		t.Errorf("guest: %q", got)
	}
	a.SetPreview(20, 0)
	if r.Find(-100, 20) != a || r.Find(-100, 10) != a || r.Find(-100, 99) != nil {
		t.Errorf("Find")
	}
}

// A job's state is its ShellJob's: the bot keeps no stop of its own.
func TestStateFollowsTheShellJob(t *testing.T) {
	j := New(Info{Name: "x"})
	if j.State() != Queued {
		t.Errorf("new: %v", j.State())
	}
	running := &shellv1alpha1.ShellJob{Status: shellv1alpha1.ShellJobStatus{Phase: shellv1alpha1.PhaseRunning, Number: 4, Ran: true}}
	j.Observe(running)
	if j.State() != Running || j.Number() != 4 {
		t.Errorf("running: %v #%d", j.State(), j.Number())
	}
	stopping := running.DeepCopy()
	stopping.Spec.Stop, stopping.Spec.StopReason = true, shellv1alpha1.StopReasonShutdown
	j.Observe(stopping)
	if stopped, why := j.Stopped(); j.State() != Stopping || !stopped || why != shellv1alpha1.StopReasonShutdown {
		t.Errorf("stopping: %v %v %v", j.State(), stopped, why)
	}
	// A stop the API server did not take leaves the job running.
	j.Observe(running)
	if stopped, _ := j.Stopped(); j.State() != Running || stopped {
		t.Errorf("the stop did not take: %v %v", j.State(), stopped)
	}
	done := stopping.DeepCopy()
	done.Status.Phase = shellv1alpha1.PhaseStopped
	shelljob.SetFinishedCondition(done, time.Now(), shellv1alpha1.ShellJobFinishedReasonStopped, "stopped")
	j.Observe(done)
	if j.State() != Ended {
		t.Errorf("finished: %v", j.State())
	}
	k := New(Info{Name: "y"})
	k.MarkEnded()
	if k.State() != Ended {
		t.Errorf("marked ended: %v", k.State())
	}
}

func TestCloseAndWaitAll(t *testing.T) {
	r := NewRegistry()
	j := mk("a", 1, 1, 1, "")
	if r.Register(j) {
		t.Fatal("a new registry is closed")
	}
	r.Close()
	go r.Finish(j)
	if left := r.WaitAll(time.After(5 * time.Second)); left != 0 {
		t.Fatalf("left %d", left)
	}
	if !r.Register(mk("b", 1, 1, 2, "")) {
		t.Fatal("a job arriving during shutdown must be told to stop")
	}
	if left := r.WaitAll(time.After(10 * time.Millisecond)); left != 1 {
		t.Fatalf("left %d, want the late job", left)
	}
}

func TestWaiting(t *testing.T) {
	unplaced := metav1.ConditionFalse
	for name, tc := range map[string]struct {
		mode      shellv1alpha1.ShellJobMode
		phase     shellv1alpha1.ShellJobPhase
		scheduled metav1.ConditionStatus
		pod       string
		stop      bool
		want      bool
	}{
		"queued, not placed":            {phase: shellv1alpha1.PhaseQueued, scheduled: unplaced, want: true},
		"stateful, not placed":          {mode: shellv1alpha1.ModeStateful, phase: shellv1alpha1.PhaseQueued, scheduled: unplaced, want: true},
		"new, no status yet":            {},
		"placed on a worker, not begun": {phase: shellv1alpha1.PhaseQueued, scheduled: metav1.ConditionTrue, pod: "shell-0"},
		"direct, placed":                {mode: shellv1alpha1.ModeDirect, phase: shellv1alpha1.PhaseQueued, scheduled: metav1.ConditionTrue, pod: "shell-0"},
		"running":                       {phase: shellv1alpha1.PhaseRunning, scheduled: metav1.ConditionTrue, pod: "shell-0"},
		"stopped while queued":          {phase: shellv1alpha1.PhaseQueued, scheduled: unplaced, stop: true},
	} {
		t.Run(name, func(t *testing.T) {
			j := New(Info{Name: "x"})
			obj := &shellv1alpha1.ShellJob{
				Spec:   shellv1alpha1.ShellJobSpec{Mode: tc.mode, Stop: tc.stop},
				Status: shellv1alpha1.ShellJobStatus{Phase: tc.phase, Pod: tc.pod},
			}
			if tc.scheduled != "" {
				shelljob.SetScheduledCondition(obj, time.Now(), tc.scheduled, "Test", "test")
			}
			j.Observe(obj)
			if got := j.Waiting(); got != tc.want {
				t.Errorf("Waiting() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestObserveUnknownPhase(t *testing.T) {
	j := mk("a", 1, -100, 10, "")
	obj := &shellv1alpha1.ShellJob{}
	obj.Status.Number, obj.Status.Phase = 3, shellv1alpha1.PhaseRunning
	j.Observe(obj)
	obj.Status.Phase = "Paused" // a phase of a newer operator
	j.Observe(obj)
	if j.State() != Running || j.Number() != 3 {
		t.Errorf("after an unknown phase: state %v, number %d", j.State(), j.Number())
	}
}

// TestSummaryFromStatus: .k ls shows the summary the operator wrote, and
// shelljob.Summary of the command until then.
func TestSummaryFromStatus(t *testing.T) {
	j := New(Info{Name: "a", Command: "cd /tmp\nls"})
	if got := j.Summary(); got != "cd /tmp…" {
		t.Errorf("summary before any status: %q", got)
	}
	obj := &shellv1alpha1.ShellJob{Spec: shellv1alpha1.ShellJobSpec{Command: "cd /tmp\nls"}}
	obj.Status.Summary = "as the operator wrote it"
	j.Observe(obj)
	if got := j.Summary(); got != obj.Status.Summary {
		t.Errorf("summary %q, want the status's %q", got, obj.Status.Summary)
	}
}
