package jobs

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/shelljob"
)

func mk(name string, owner, chat int64, cmd int, guest string) *Job {
	return New(Info{Name: name, Owner: owner, Chat: chat, CommandMsg: cmd, Guest: guest, Created: time.Now()}, nil)
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

func TestCancelOutcomes(t *testing.T) {
	var stops []shellv1alpha1.StopReason
	j := New(Info{Name: "x"}, func(r shellv1alpha1.StopReason) { stops = append(stops, r) })
	if got := j.Cancel(shellv1alpha1.StopReasonUser); got != OutcomeNotStarted {
		t.Errorf("queued: %v", got)
	}
	if got := j.Cancel(shellv1alpha1.StopReasonShutdown); got != OutcomeAlreadyStopping {
		t.Errorf("again: %v", got)
	}
	if _, r := j.Stopped(); r != shellv1alpha1.StopReasonUser || len(stops) != 1 {
		t.Errorf("first stop must count: %v %v", r, stops)
	}
	k := New(Info{Name: "y"}, nil)
	k.Observe(&shellv1alpha1.ShellJob{Status: shellv1alpha1.ShellJobStatus{Phase: shellv1alpha1.PhaseRunning, Number: 4}})
	if got := k.Cancel(shellv1alpha1.StopReasonUser); got != OutcomeStopping || k.State() != Stopping || k.Number() != 4 {
		t.Errorf("running: %v %v", got, k.State())
	}
	e := New(Info{Name: "z"}, nil)
	e.MarkEnded()
	if got := e.Cancel(shellv1alpha1.StopReasonUser); got != OutcomeFinished {
		t.Errorf("ended: %v", got)
	}
}

func TestStopAllClosesRegistry(t *testing.T) {
	r := NewRegistry()
	j := mk("a", 1, 1, 1, "")
	r.Register(j)
	go func() {
		<-j.Changed()
		r.Finish(j)
	}()
	if left := r.StopAll(shellv1alpha1.StopReasonShutdown, time.After(5*time.Second)); left != 0 {
		t.Fatalf("left %d", left)
	}
	late := mk("b", 1, 1, 2, "")
	r.Register(late)
	if ok, why := late.Stopped(); !ok || why != shellv1alpha1.StopReasonShutdown {
		t.Fatalf("a job arriving during shutdown must be stopped: %v %v", ok, why)
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
			j := New(Info{Name: "x"}, nil)
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
	j := New(Info{Name: "a", Command: "cd /tmp\nls"}, nil)
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
