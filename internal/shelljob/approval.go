package shelljob

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
)

// ApprovalState is where a job stands with its pool's approval.
type ApprovalState int

const (
	// NoApprovalNeeded: its pool requires none; a decision on the job
	// changes nothing.
	NoApprovalNeeded ApprovalState = iota
	// AwaitingApproval: no one has decided, and the deadline has not
	// passed: the job is not placed.
	AwaitingApproval
	// ApprovalGranted: someone approved it; it is placed as any other job.
	ApprovalGranted
	// ApprovalDenied: someone denied it; it ends without running.
	ApprovalDenied
	// ApprovalExpired: no one decided by the deadline; it ends without
	// running.
	ApprovalExpired
)

// DefaultApprovalTimeout is how long a job waits for a decision on a pool
// whose approval sets no timeout (the API's default).
const DefaultApprovalTimeout = 10 * time.Minute

// ApprovalTimeout is how long the jobs of a pool with approval a wait for
// a decision.
func ApprovalTimeout(a *shellv1alpha1.ShellPoolApproval) time.Duration {
	if a == nil || a.TimeoutSeconds <= 0 {
		return DefaultApprovalTimeout
	}
	return time.Duration(a.TimeoutSeconds) * time.Second
}

// Approval is how a job stands at now with the approval a of its pool (nil
// for a pool that requires none), and, while it awaits a decision, the
// deadline: the pool's timeout after the operator first put the job in
// AwaitingApproval (its Approved condition), or after now if it has not
// yet. A decision recorded before the operator ended the job counts, even
// past the deadline: the person who made it was not refused.
func Approval(j *shellv1alpha1.ShellJob, a *shellv1alpha1.ShellPoolApproval, now time.Time) (ApprovalState, time.Time) {
	if a == nil {
		return NoApprovalNeeded, time.Time{}
	}
	if d := j.Spec.Approval; d != nil {
		switch d.Decision {
		case shellv1alpha1.ApprovalApproved:
			return ApprovalGranted, time.Time{}
		case shellv1alpha1.ApprovalDenied:
			return ApprovalDenied, time.Time{}
		}
	}
	// The condition keeps whole seconds: the deadline does too, from the
	// first pass on.
	since := now.Truncate(time.Second)
	if c := meta.FindStatusCondition(j.Status.Conditions, shellv1alpha1.ShellJobApproved); c != nil &&
		c.Status == metav1.ConditionFalse && c.Reason == shellv1alpha1.ShellJobApprovedReasonAwaitingApproval {
		since = c.LastTransitionTime.Time
	}
	deadline := since.Add(ApprovalTimeout(a))
	if !now.Before(deadline) {
		return ApprovalExpired, deadline
	}
	return AwaitingApproval, deadline
}

// IsNotApproved tells whether the job ended without running for its
// approval: denied, or not decided in time.
func IsNotApproved(j *shellv1alpha1.ShellJob) bool {
	if c := meta.FindStatusCondition(j.Status.Conditions, shellv1alpha1.ShellJobFinished); c != nil && c.Status == metav1.ConditionTrue {
		switch c.Reason {
		case shellv1alpha1.ShellJobFinishedReasonDenied, shellv1alpha1.ShellJobFinishedReasonApprovalExpired:
			return true
		}
	}
	return j.Status.Phase == shellv1alpha1.PhaseDenied || j.Status.Phase == shellv1alpha1.PhaseExpired
}

// IsAwaitingApproval tells whether the job waits for a decision on its
// approval, as the operator last wrote.
func IsAwaitingApproval(j *shellv1alpha1.ShellJob) bool {
	return j.Status.Phase == shellv1alpha1.PhaseAwaitingApproval && !IsFinished(j)
}

// SetApprovedCondition sets the Approved condition and reports whether
// anything changed.
func SetApprovedCondition(j *shellv1alpha1.ShellJob, now time.Time, status metav1.ConditionStatus, reason, msg string) bool {
	return setCondition(&j.Status.Conditions, j.Generation, now, shellv1alpha1.ShellJobApproved, status, reason, msg)
}
