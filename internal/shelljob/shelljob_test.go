package shelljob

import (
	"math"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

func TestSummary(t *testing.T) {
	cases := map[string]struct{ cmd, want string }{
		"short":          {"echo hi", "echo hi"},
		"blanks trimmed": {"  \n\n  ls -la  \n", "ls -la"},
		"more lines":     {"cd /tmp\nls", "cd /tmp…"},
		"long line":      {strings.Repeat("é", 70), strings.Repeat("é", 59) + "…"},
		"exactly 60":     {strings.Repeat("x", 60), strings.Repeat("x", 60)},
		"invalid utf-8":  {"echo \xff", "echo \uFFFD"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Summary(tc.cmd); got != tc.want {
				t.Errorf("Summary(%q) = %q, want %q", tc.cmd, got, tc.want)
			}
		})
	}
}

// TestSummaryKeepsNoCommand: a summary shares no memory with its command,
// so a slim job in a cache does not keep its 64 KiB command alive, and
// summing up a long line does not cost a multiple of it.
func TestSummaryKeepsNoCommand(t *testing.T) {
	for name, cmd := range map[string]string{
		"one line, padded": "echo hi" + strings.Repeat(" ", 64<<10),
		"one line":         "echo hi",
		"a long line":      strings.Repeat("é", 32<<10),
	} {
		t.Run(name, func(t *testing.T) {
			got := Summary(cmd)
			start := uintptr(unsafe.Pointer(unsafe.StringData(cmd)))
			if p := uintptr(unsafe.Pointer(unsafe.StringData(got))); p >= start && p < start+uintptr(len(cmd)) {
				t.Errorf("Summary(%.20q…) = %q points into the command", cmd, got)
			}
		})
	}
	long := strings.Repeat("x", 64<<10)
	if n := testing.AllocsPerRun(10, func() { _ = Summary(long) }); n > 2 {
		t.Errorf("Summary of a 64 KiB line makes %v allocations", n)
	}
}

func TestSummaryOf(t *testing.T) {
	j := utiltesting.MakeShellJob("j", "ns").Command("cd /tmp\nls").Obj()
	if got := SummaryOf(j); got != "cd /tmp…" {
		t.Errorf("SummaryOf before the operator wrote one = %q", got)
	}
	j.Status.Summary = "written"
	if got := SummaryOf(j); got != "written" {
		t.Errorf("SummaryOf = %q, want status.summary", got)
	}
}

func TestSetFinishedCondition(t *testing.T) {
	now := time.Date(2026, 1, 1, 10, 0, 0, 700_000_000, time.UTC)
	j := utiltesting.MakeShellJob("j", "ns").Obj()
	j.Generation = 3
	if !SetFinishedCondition(j, now, shellv1alpha1.ShellJobFinishedReasonExited, "exit 0") {
		t.Fatal("first set reported no change")
	}
	if SetFinishedCondition(j, now.Add(time.Minute), shellv1alpha1.ShellJobFinishedReasonExited, "exit 0") {
		t.Error("same condition reported a change")
	}
	want := []metav1.Condition{{
		Type: "Finished", Status: metav1.ConditionTrue, ObservedGeneration: 3,
		LastTransitionTime: metav1.NewTime(now.Truncate(time.Second)),
		Reason:             "Exited", Message: "exit 0",
	}}
	if diff := cmp.Diff(want, j.Status.Conditions); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
	if !IsFinished(j) {
		t.Error("IsFinished = false")
	}
	SetScheduledCondition(j, now, metav1.ConditionFalse, "NoIdleWorker", strings.Repeat("m", 40000))
	c := j.Status.Conditions[1]
	if len(c.Message) > maxMessage {
		t.Errorf("message of %d bytes, want at most %d", len(c.Message), maxMessage)
	}
	if diff := cmp.Diff(metav1.ConditionFalse, c.Status, cmpopts.EquateEmpty()); diff != "" {
		t.Error(diff)
	}
}

func TestStopPredicates(t *testing.T) {
	j := utiltesting.MakeShellJob("j", "ns").Obj()
	if IsStopRequested(j) {
		t.Error("a new job is not to stop")
	}
	j.Status.StopReason = shellv1alpha1.StopReasonTimeout
	if !IsStopRequested(j) {
		t.Error("a timed out job is to stop")
	}
	s := utiltesting.MakeShellJob("s", "ns").Obj()
	s.Spec.Stop = true
	if !IsStopRequested(s) || RequestedStopReason(s) != shellv1alpha1.StopReasonUser {
		t.Errorf("spec.stop without a reason: requested %v, reason %q", IsStopRequested(s), RequestedStopReason(s))
	}
}

func TestExpiry(t *testing.T) {
	end := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	const ttl, grace = time.Minute, 10 * time.Minute
	chat := shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginTelegram, User: "1"}
	cases := map[string]struct {
		job      *utiltesting.ShellJobWrapper
		mark     string
		ttl      time.Duration
		want     time.Time
		awaiting bool
	}{
		"cli job, from its end":             {job: utiltesting.MakeShellJob("j", "ns"), want: end.Add(ttl)},
		"chat job delivered, from the mark": {job: utiltesting.MakeShellJob("j", "ns").Origin(chat), mark: "2026-01-01T10:05:00Z", want: end.Add(5*time.Minute + ttl)},
		"chat job undelivered, the grace":   {job: utiltesting.MakeShellJob("j", "ns").Origin(chat), want: end.Add(grace), awaiting: true},
		"chat job undelivered, a long ttl":  {job: utiltesting.MakeShellJob("j", "ns").Origin(chat), ttl: time.Hour, want: end.Add(time.Hour), awaiting: true},
		"mark before the end":               {job: utiltesting.MakeShellJob("j", "ns").Origin(chat), mark: "2026-01-01T09:59:00Z", want: end.Add(ttl)},
		"mark with no time":                 {job: utiltesting.MakeShellJob("j", "ns").Origin(chat), mark: "yes", want: end.Add(ttl)},
		"cli job marked":                    {job: utiltesting.MakeShellJob("j", "ns"), mark: "2026-01-01T10:02:00Z", want: end.Add(2*time.Minute + ttl)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			j := tc.job.Obj()
			j.Status.CompletionTime = &metav1.Time{Time: end}
			if tc.mark != "" {
				j.Annotations = map[string]string{shellv1alpha1.AnnotationDelivered: tc.mark}
			}
			if tc.ttl == 0 {
				tc.ttl = ttl
			}
			got, ok := Expiry(j, tc.ttl, grace)
			if !ok || !got.Equal(tc.want) {
				t.Errorf("Expiry = %v, %v; want %v", got, ok, tc.want)
			}
			if a := AwaitsDelivery(j); a != tc.awaiting {
				t.Errorf("AwaitsDelivery = %v, want %v", a, tc.awaiting)
			}
		})
	}
	if _, ok := Expiry(utiltesting.MakeShellJob("j", "ns").Obj(), ttl, grace); ok {
		t.Error("a job with no CompletionTime expires")
	}
}

func TestIsFinishedByPhase(t *testing.T) {
	cases := map[shellv1alpha1.ShellJobPhase]bool{
		"":                           false,
		shellv1alpha1.PhaseQueued:    false,
		shellv1alpha1.PhaseRunning:   false,
		shellv1alpha1.PhaseStopping:  false,
		shellv1alpha1.PhaseSucceeded: true,
		shellv1alpha1.PhaseFailed:    true,
		shellv1alpha1.PhaseStopped:   true,
		"Paused":                     false, // a phase of a newer operator
	}
	for phase, want := range cases {
		j := utiltesting.MakeShellJob("j", "ns").Obj()
		j.Status.Phase = phase
		if got := IsFinished(j); got != want {
			t.Errorf("IsFinished(phase %q) = %v, want %v", phase, got, want)
		}
	}
	j := utiltesting.MakeShellJob("j", "ns").Obj()
	j.Status.Phase = "Paused"
	SetFinishedCondition(j, time.Now(), shellv1alpha1.ShellJobFinishedReasonExited, "exit 0")
	if !IsFinished(j) {
		t.Error("an unknown phase with Finished=True is not finished")
	}
}

func TestPhase(t *testing.T) {
	for phase, want := range map[shellv1alpha1.ShellJobPhase]shellv1alpha1.ShellJobPhase{
		"":                         shellv1alpha1.PhaseQueued,
		shellv1alpha1.PhaseRunning: shellv1alpha1.PhaseRunning,
		"Paused":                   "Paused",
	} {
		j := utiltesting.MakeShellJob("j", "ns").Obj()
		j.Status.Phase = phase
		if got := Phase(j); got != want {
			t.Errorf("Phase(phase %q) = %q, want %q", phase, got, want)
		}
	}
}

func TestIsStopped(t *testing.T) {
	for name, tc := range map[string]struct {
		phase  shellv1alpha1.ShellJobPhase
		reason string
		want   bool
	}{
		"queued":                    {phase: shellv1alpha1.PhaseQueued},
		"stopping":                  {phase: shellv1alpha1.PhaseStopping},
		"succeeded":                 {phase: shellv1alpha1.PhaseSucceeded, reason: shellv1alpha1.ShellJobFinishedReasonExited},
		"failed":                    {phase: shellv1alpha1.PhaseFailed, reason: shellv1alpha1.ShellJobFinishedReasonWorkerLost},
		"stopped":                   {phase: shellv1alpha1.PhaseStopped, reason: shellv1alpha1.ShellJobFinishedReasonStopped, want: true},
		"stopped before it ran":     {phase: shellv1alpha1.PhaseStopped, reason: shellv1alpha1.ShellJobFinishedReasonStoppedBeforeRun, want: true},
		"stopped, no condition yet": {phase: shellv1alpha1.PhaseStopped, want: true},
		"stopped, newer phase":      {phase: "Paused", reason: shellv1alpha1.ShellJobFinishedReasonStopped, want: true},
		"newer phase":               {phase: "Paused"},
	} {
		j := utiltesting.MakeShellJob("j", "ns").Obj()
		j.Status.Phase = tc.phase
		if tc.reason != "" {
			SetFinishedCondition(j, time.Now(), tc.reason, "")
		}
		if got := IsStopped(j); got != tc.want {
			t.Errorf("%s: IsStopped = %v, want %v", name, got, tc.want)
		}
	}
}

func TestMayHaveFiles(t *testing.T) {
	for name, tc := range map[string]struct {
		files *shellv1alpha1.ShellJobFiles
		want  bool
	}{
		"not counted": {want: true},
		"none":        {files: &shellv1alpha1.ShellJobFiles{}},
		"some":        {files: &shellv1alpha1.ShellJobFiles{Count: 2, Bytes: 10}, want: true},
	} {
		j := utiltesting.MakeShellJob("j", "ns").Obj()
		j.Status.Files = tc.files
		if got := MayHaveFiles(j); got != tc.want {
			t.Errorf("%s: MayHaveFiles = %v, want %v", name, got, tc.want)
		}
	}
}

func TestTelegramName(t *testing.T) {
	cases := map[string]struct {
		origin shellv1alpha1.ShellJobOrigin
		want   string
	}{
		"supergroup":     {shellv1alpha1.ShellJobOrigin{Chat: -1001234567890, Message: 56}, "tg-m1001234567890-56-1767225600"},
		"private":        {shellv1alpha1.ShellJobOrigin{Chat: 777, Message: 3}, "tg-777-3-1767225600"},
		"topic":          {shellv1alpha1.ShellJobOrigin{Chat: -1001234567890, Topic: 7, Message: 56}, "tg-m1001234567890-56-1767225600"},
		"guest":          {shellv1alpha1.ShellJobOrigin{GuestQuery: "123456789012345"}, "tg-q123456789012345-1767225600"},
		"negative guest": {shellv1alpha1.ShellJobOrigin{GuestQuery: "-5"}, "tg-qm5-1767225600"},
		"odd guest":      {shellv1alpha1.ShellJobOrigin{GuestQuery: "a b"}, ""},
		"no message":     {shellv1alpha1.ShellJobOrigin{Chat: 5}, ""},
		"extremes":       {shellv1alpha1.ShellJobOrigin{Chat: math.MinInt64, Message: math.MaxInt64}, "tg-m9223372036854775808-9223372036854775807-1767225600"},
	}
	sent := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := TelegramName(tc.origin, sent)
			if got != tc.want {
				t.Fatalf("TelegramName = %q, want %q", got, tc.want)
			}
			if got != "" {
				if errs := validation.IsDNS1123Subdomain(got); len(errs) > 0 || len(got) > validation.DNS1123LabelMaxLength {
					t.Errorf("%q is no DNS-1123 name of at most 63 characters: %v", got, errs)
				}
			}
		})
	}
	o := shellv1alpha1.ShellJobOrigin{Chat: 5, Message: 1}
	if TelegramName(o, sent) == TelegramName(o, sent.Add(time.Hour)) {
		t.Error("one message id sent at two times names one job")
	}
}

func TestIsWaiting(t *testing.T) {
	now := time.Now()
	notPlaced := func(j *shellv1alpha1.ShellJob) {
		SetScheduledCondition(j, now, metav1.ConditionFalse, shellv1alpha1.ShellJobScheduledReasonNoIdleWorker, "all busy")
	}
	for name, tc := range map[string]struct {
		set  func(*shellv1alpha1.ShellJob)
		want bool
	}{
		"not looked at yet": {set: func(*shellv1alpha1.ShellJob) {}},
		"not placed":        {set: notPlaced, want: true},
		"placed": {set: func(j *shellv1alpha1.ShellJob) {
			j.Status.Pod = "shell-0"
			SetScheduledCondition(j, now, metav1.ConditionTrue, shellv1alpha1.ShellJobScheduledReasonAssigned, "shell-0")
		}},
		"stopped before it ran": {set: func(j *shellv1alpha1.ShellJob) {
			notPlaced(j)
			j.Status.Phase = shellv1alpha1.PhaseStopped
		}},
	} {
		t.Run(name, func(t *testing.T) {
			j := &shellv1alpha1.ShellJob{}
			tc.set(j)
			if got := IsWaiting(j); got != tc.want {
				t.Errorf("IsWaiting = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDecideStop(t *testing.T) {
	job := func(phase shellv1alpha1.ShellJobPhase, ran bool, edit func(*shellv1alpha1.ShellJob)) *shellv1alpha1.ShellJob {
		j := utiltesting.MakeShellJob("j", "ns").Obj()
		j.Status.Phase, j.Status.Ran = phase, ran
		if edit != nil {
			edit(j)
		}
		return j
	}
	for name, tc := range map[string]struct {
		job  *shellv1alpha1.ShellJob
		want StopOutcome
	}{
		"new":     {job("", false, nil), StopNotStarted},
		"queued":  {job(shellv1alpha1.PhaseQueued, false, nil), StopNotStarted},
		"running": {job(shellv1alpha1.PhaseRunning, true, nil), StopSent},
		"asked to stop": {job(shellv1alpha1.PhaseRunning, true, func(j *shellv1alpha1.ShellJob) {
			j.Spec.Stop, j.Spec.StopReason = true, shellv1alpha1.StopReasonUser
		}), StopAlreadyRequested},
		"timed out": {job(shellv1alpha1.PhaseStopping, true, func(j *shellv1alpha1.ShellJob) {
			j.Status.StopReason = shellv1alpha1.StopReasonTimeout
		}), StopAlreadyRequested},
		"finished": {job(shellv1alpha1.PhaseSucceeded, true, func(j *shellv1alpha1.ShellJob) {
			SetFinishedCondition(j, time.Now(), shellv1alpha1.ShellJobFinishedReasonExited, "exited")
		}), StopAlreadyEnded},
	} {
		t.Run(name, func(t *testing.T) {
			if got := DecideStop(tc.job); got != tc.want {
				t.Errorf("DecideStop = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestStopOutcomeText(t *testing.T) {
	for out, want := range map[StopOutcome]string{
		StopSent: "⏹ Stopping #3…", StopNotStarted: "⏹ Stopping #3…",
		StopAlreadyRequested: "#3 is already stopping.", StopAlreadyEnded: "#3 has already ended.",
	} {
		if got := out.Text(3); got != want {
			t.Errorf("%v: %q, want %q", out, got, want)
		}
	}
}

func TestEndOf(t *testing.T) {
	job := func(edit func(*shellv1alpha1.ShellJob)) *shellv1alpha1.ShellJob {
		j := utiltesting.MakeShellJob("j", "ns").Obj()
		edit(j)
		return j
	}
	finished := func(j *shellv1alpha1.ShellJob, phase shellv1alpha1.ShellJobPhase, reason, msg string, code *int32) {
		j.Status.Phase, j.Status.ExitCode = phase, code
		SetFinishedCondition(j, time.Now(), reason, msg)
	}
	code := func(c int32) *int32 { return &c }
	for name, tc := range map[string]struct {
		job        *shellv1alpha1.ShellJob
		want       End
		byWorker   bool
		outputGone bool
	}{
		"exited": {job: job(func(j *shellv1alpha1.ShellJob) {
			j.Status.Ran = true
			finished(j, shellv1alpha1.PhaseFailed, shellv1alpha1.ShellJobFinishedReasonExited, "exit 3", code(3))
		}), want: End{ExitCode: 3, Ran: true, Reason: shellv1alpha1.ShellJobFinishedReasonExited, Message: "exit 3"}},
		"stopped by a user": {job: job(func(j *shellv1alpha1.ShellJob) {
			j.Spec.Stop, j.Status.Ran = true, true
			finished(j, shellv1alpha1.PhaseStopped, shellv1alpha1.ShellJobFinishedReasonStopped, "", code(130))
		}), want: End{ExitCode: 130, Ran: true, Stop: shellv1alpha1.StopReasonUser, Stopped: true, Reason: shellv1alpha1.ShellJobFinishedReasonStopped}},
		"stopped before it ran, at a shutdown": {job: job(func(j *shellv1alpha1.ShellJob) {
			j.Spec.Stop, j.Spec.StopReason = true, shellv1alpha1.StopReasonShutdown
			finished(j, shellv1alpha1.PhaseStopped, shellv1alpha1.ShellJobFinishedReasonStoppedBeforeRun, "", nil)
		}), want: End{ExitCode: -1, Stop: shellv1alpha1.StopReasonShutdown, Stopped: true, Reason: shellv1alpha1.ShellJobFinishedReasonStoppedBeforeRun}},
		"timed out": {job: job(func(j *shellv1alpha1.ShellJob) {
			j.Status.Ran, j.Status.StopReason = true, shellv1alpha1.StopReasonTimeout
			finished(j, shellv1alpha1.PhaseStopped, shellv1alpha1.ShellJobFinishedReasonStopped, "", code(143))
		}), want: End{ExitCode: 143, Ran: true, Stopped: true, TimedOut: true, Reason: shellv1alpha1.ShellJobFinishedReasonStopped}},
		"a start that failed": {job: job(func(j *shellv1alpha1.ShellJob) {
			finished(j, shellv1alpha1.PhaseFailed, shellv1alpha1.ShellJobFinishedReasonExited, "no shell", code(127))
		}), want: End{ExitCode: 127, Ran: true, Reason: shellv1alpha1.ShellJobFinishedReasonExited, Message: "no shell"}},
		"worker lost": {job: job(func(j *shellv1alpha1.ShellJob) {
			j.Status.Ran = true
			finished(j, shellv1alpha1.PhaseFailed, shellv1alpha1.ShellJobFinishedReasonWorkerLost, "gone", nil)
		}), want: End{ExitCode: -1, Ran: true, Reason: shellv1alpha1.ShellJobFinishedReasonWorkerLost, Message: "gone"}, byWorker: true, outputGone: true},
		"hold timed out": {job: job(func(j *shellv1alpha1.ShellJob) {
			finished(j, shellv1alpha1.PhaseFailed, shellv1alpha1.ShellJobFinishedReasonHoldTimedOut, "held too long", nil)
		}), want: End{ExitCode: -1, Ran: true, Reason: shellv1alpha1.ShellJobFinishedReasonHoldTimedOut, Message: "held too long"}, byWorker: true},
	} {
		t.Run(name, func(t *testing.T) {
			got := EndOf(tc.job)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("EndOf (-want +got):\n%s", diff)
			}
			if byWorker, gone := got.ByWorker(); byWorker != tc.byWorker || gone != tc.outputGone {
				t.Errorf("ByWorker = %v, %v; want %v, %v", byWorker, gone, tc.byWorker, tc.outputGone)
			}
		})
	}
}
