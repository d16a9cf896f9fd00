package shelljob

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

// TestSetExited: the phase, Finished condition and Event of a job whose
// command exited, from its exit and the signals sent to it.
func TestSetExited(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	exitedAt := now.Add(-time.Second)
	sigint := []shellv1alpha1.StopStep{{Signal: shellv1alpha1.SIGINT, Time: metav1.NewTime(now.Add(-2 * time.Second))}}
	type want struct {
		phase      shellv1alpha1.ShellJobPhase
		reason     string
		message    string
		stopReason shellv1alpha1.StopReason
		event      Event
	}
	cases := map[string]struct {
		exit       Exit
		steps      []shellv1alpha1.StopStep
		stopReason shellv1alpha1.StopReason
		// stopBy sets spec.stop, by them.
		stopBy string
		limit  string
		want   want
	}{
		"stopped by someone": {
			exit: Exit{Code: ptr.To(130), At: exitedAt}, steps: sigint, stopReason: shellv1alpha1.StopReasonUser, stopBy: "bob",
			want: want{phase: shellv1alpha1.PhaseStopped, reason: "Stopped", message: "stopped by bob (User) after SIGINT: exit 130",
				stopReason: shellv1alpha1.StopReasonUser,
				event:      Event{corev1.EventTypeNormal, "Stopped", "stopped by bob (User) after SIGINT: exit 130"}},
		},
		"a timeout's stop before someone's names no one": {
			exit: Exit{Code: ptr.To(130), At: exitedAt}, steps: sigint, stopReason: shellv1alpha1.StopReasonTimeout, stopBy: "bob",
			want: want{phase: shellv1alpha1.PhaseStopped, reason: "Stopped", message: "stopped (Timeout) after SIGINT: exit 130",
				stopReason: shellv1alpha1.StopReasonTimeout,
				event:      Event{corev1.EventTypeNormal, "Stopped", "stopped (Timeout) after SIGINT: exit 130"}},
		},
		"exit 0": {
			exit: Exit{Code: ptr.To(0), At: exitedAt},
			want: want{phase: shellv1alpha1.PhaseSucceeded, reason: "Exited", message: "exit 0",
				event: Event{corev1.EventTypeNormal, "Succeeded", "exit 0"}},
		},
		"exit 3": {
			exit: Exit{Code: ptr.To(3), At: exitedAt},
			want: want{phase: shellv1alpha1.PhaseFailed, reason: "Exited", message: "exit 3",
				event: Event{corev1.EventTypeWarning, "Failed", "exit 3"}},
		},
		"exit status unknown": {
			exit: Exit{At: exitedAt},
			want: want{phase: shellv1alpha1.PhaseFailed, reason: "Exited", message: "exit status unknown",
				event: Event{corev1.EventTypeWarning, "Failed", "exit status unknown"}},
		},
		"stopped after a signal": {
			exit: Exit{Code: ptr.To(130), At: exitedAt}, steps: sigint, stopReason: shellv1alpha1.StopReasonUser,
			want: want{phase: shellv1alpha1.PhaseStopped, reason: "Stopped", message: "stopped (User) after SIGINT: exit 130",
				stopReason: shellv1alpha1.StopReasonUser,
				event:      Event{corev1.EventTypeNormal, "Stopped", "stopped (User) after SIGINT: exit 130"}},
		},
		"a stop that came after the exit sent nothing": {
			exit: Exit{Code: ptr.To(0), At: exitedAt}, stopReason: shellv1alpha1.StopReasonUser,
			want: want{phase: shellv1alpha1.PhaseSucceeded, reason: "Exited", message: "exit 0",
				event: Event{corev1.EventTypeNormal, "Succeeded", "exit 0"}},
		},
		"out of memory": {
			exit: Exit{Worker: "w-0", Code: ptr.To(137), At: exitedAt, OOMKills: 2}, limit: "1Gi",
			want: want{phase: shellv1alpha1.PhaseFailed, reason: "OutOfMemory",
				message: "the command ran out of memory: the out-of-memory killer killed 2 of its processes at worker w-0's limit of 1Gi; exit 137",
				event: Event{corev1.EventTypeWarning, "OutOfMemory",
					"the command ran out of memory: the out-of-memory killer killed 2 of its processes at worker w-0's limit of 1Gi; exit 137"}},
		},
		"killed out of memory but exit 0": {
			exit: Exit{Code: ptr.To(0), At: exitedAt, OOMKills: 1},
			want: want{phase: shellv1alpha1.PhaseSucceeded, reason: "Exited", message: "exit 0",
				event: Event{corev1.EventTypeNormal, "Succeeded", "exit 0"}},
		},
		"stopped while out of memory": {
			exit: Exit{Code: ptr.To(137), At: exitedAt, OOMKills: 1}, steps: sigint, stopReason: shellv1alpha1.StopReasonTimeout,
			want: want{phase: shellv1alpha1.PhaseStopped, reason: "Stopped", message: "stopped (Timeout) after SIGINT: exit 137",
				stopReason: shellv1alpha1.StopReasonTimeout,
				event:      Event{corev1.EventTypeNormal, "Stopped", "stopped (Timeout) after SIGINT: exit 137"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			j := utiltesting.MakeShellJob("j", "ns").Obj()
			j.Status.StopSteps, j.Status.StopReason = tc.steps, tc.stopReason
			if tc.stopBy != "" {
				j.Spec.Stop, j.Spec.StopBy = true, tc.stopBy
			}
			ev := SetExited(j, tc.exit, tc.limit, now)
			c := findFinished(j)
			got := want{phase: j.Status.Phase, stopReason: j.Status.StopReason, event: ev}
			if c != nil {
				got.reason, got.message = c.Reason, c.Message
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("SetExited (-want +got):\n%s", diff)
			}
			if j.Status.CompletionTime == nil || !j.Status.CompletionTime.Time.Equal(exitedAt) {
				t.Errorf("completion time %v, want the exit's %v", j.Status.CompletionTime, exitedAt)
			}
		})
	}
}

// TestRecordExit: what an exit writes into the status, and how it reads.
func TestRecordExit(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	j := utiltesting.MakeShellJob("j", "ns").Obj()
	j.Status.Files = &shellv1alpha1.ShellJobFiles{Count: 9}
	j.Status.ExitCode = ptr.To[int32](1)
	if got := RecordExit(j, Exit{OutputBytes: 10, DroppedBytes: 2}, now); got != "exit status unknown" {
		t.Errorf("RecordExit = %q, want exit status unknown", got)
	}
	want := shellv1alpha1.ShellJobStatus{CompletionTime: ptr.To(metav1.NewTime(now)), OutputBytes: 10, DroppedBytes: 2}
	if diff := cmp.Diff(want, j.Status, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("status with no exit code (-want +got):\n%s", diff)
	}

	files := &shellv1alpha1.ShellJobFiles{Count: 2, Bytes: 300}
	if got := RecordExit(j, Exit{Code: ptr.To(4), At: now.Add(-time.Second), Files: files}, now); got != "exit 4" {
		t.Errorf("RecordExit = %q, want exit 4", got)
	}
	want = shellv1alpha1.ShellJobStatus{CompletionTime: ptr.To(metav1.NewTime(now.Add(-time.Second))), ExitCode: ptr.To[int32](4),
		Files: &shellv1alpha1.ShellJobFiles{Count: 2, Bytes: 300}}
	if diff := cmp.Diff(want, j.Status, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("status with an exit code (-want +got):\n%s", diff)
	}
	if j.Status.Files == files {
		t.Error("the status shares the exit's files")
	}
}

func findFinished(j *shellv1alpha1.ShellJob) *metav1.Condition {
	for i, c := range j.Status.Conditions {
		if c.Type == shellv1alpha1.ShellJobFinished {
			return &j.Status.Conditions[i]
		}
	}
	return nil
}
