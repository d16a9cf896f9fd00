package shelljob_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/shelljob"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

func TestApproval(t *testing.T) {
	now := time.Date(2026, 12, 2, 17, 0, 0, 500, time.UTC)
	sec := now.Truncate(time.Second) // what the condition keeps
	tenMin := &shellv1alpha1.ShellPoolApproval{TimeoutSeconds: 600}
	awaitingSince := func(at time.Time) *shellv1alpha1.ShellJob {
		j := utiltesting.MakeShellJob("j", "ns").Obj()
		shelljob.SetApprovedCondition(j, at, metav1.ConditionFalse, shellv1alpha1.ShellJobApprovedReasonAwaitingApproval, "waiting")
		return j
	}
	fresh := utiltesting.MakeShellJob("j", "ns").Obj()
	cases := map[string]struct {
		j        *shellv1alpha1.ShellJob
		a        *shellv1alpha1.ShellPoolApproval
		want     shelljob.ApprovalState
		deadline time.Time
	}{
		"a pool with no approval":               {j: fresh, want: shelljob.NoApprovalNeeded},
		"a decision on a pool with no approval": {j: utiltesting.MakeShellJob("j", "ns").Approval(shellv1alpha1.ApprovalDenied, "bob").Obj(), want: shelljob.NoApprovalNeeded},
		"first seen: the timeout counts from now, in whole seconds as the condition will": {j: fresh, a: tenMin, want: shelljob.AwaitingApproval,
			deadline: sec.Add(10 * time.Minute)},
		"awaiting since 9 min":  {j: awaitingSince(now.Add(-9 * time.Minute)), a: tenMin, want: shelljob.AwaitingApproval, deadline: sec.Add(time.Minute)},
		"awaiting since 10 min": {j: awaitingSince(now.Add(-10 * time.Minute)), a: tenMin, want: shelljob.ApprovalExpired, deadline: sec},
		"the default timeout":   {j: awaitingSince(now.Add(-5 * time.Minute)), a: &shellv1alpha1.ShellPoolApproval{}, want: shelljob.AwaitingApproval, deadline: sec.Add(5 * time.Minute)},
		"approved":              {j: utiltesting.MakeShellJob("j", "ns").Approval(shellv1alpha1.ApprovalApproved, "bob").Obj(), a: tenMin, want: shelljob.ApprovalGranted},
		"denied":                {j: utiltesting.MakeShellJob("j", "ns").Approval(shellv1alpha1.ApprovalDenied, "bob").Obj(), a: tenMin, want: shelljob.ApprovalDenied},
		"approved past the deadline, before the operator ended it": {
			j: func() *shellv1alpha1.ShellJob {
				j := awaitingSince(now.Add(-time.Hour))
				j.Spec.Approval = &shellv1alpha1.ShellJobApproval{Decision: shellv1alpha1.ApprovalApproved, By: "bob"}
				return j
			}(), a: tenMin, want: shelljob.ApprovalGranted},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, deadline := shelljob.Approval(tc.j, tc.a, now)
			if got != tc.want || !deadline.Equal(tc.deadline) {
				t.Errorf("Approval = %v, %v; want %v, %v", got, deadline, tc.want, tc.deadline)
			}
		})
	}
}

// TestEndOfNotApproved: a denied or expired job never ran, and is not
// taken for a failed start.
func TestEndOfNotApproved(t *testing.T) {
	for _, reason := range []string{shellv1alpha1.ShellJobFinishedReasonDenied, shellv1alpha1.ShellJobFinishedReasonApprovalExpired} {
		j := utiltesting.MakeShellJob("j", "ns").Obj()
		j.Status.Phase = shellv1alpha1.PhaseDenied
		shelljob.SetFinishedCondition(j, time.Now(), reason, "denied by bob")
		e := shelljob.EndOf(j)
		if e.Ran || !e.NotApproved || e.Stopped || e.ExitCode != -1 || !shelljob.IsFinished(j) {
			t.Errorf("%s: %+v, finished %v; want a finished job that never ran, not approved", reason, e, shelljob.IsFinished(j))
		}
	}
}
