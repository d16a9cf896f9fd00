package shelljob

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
)

// An End is how a finished job ended, as its final (in the chat) and its
// exit (in the terminal) tell it.
type End struct {
	// ExitCode is the command's exit code, -1 when it has none.
	ExitCode int
	// Ran: the command ran, or, unless a client's stop or its approval
	// ended the job, its start failed (what it wrote and its code then
	// show); false for a job a client stopped before it ran, or that was
	// denied or not approved in time.
	Ran bool
	// Stop is the reason of the client's stop (User, Shutdown) that ended
	// the job, "" when none did.
	Stop shellv1alpha1.StopReason
	// Stopped: a stop ended it, a client's, a timeout or the job's
	// deletion (IsStopped).
	Stopped bool
	// StopBy is who stopped it, when a client's stop named them (Stopper).
	StopBy string
	// TimedOut: the operator stopped it for its timeout.
	TimedOut bool
	// NotApproved: it never ran, for its pool's approval: someone denied
	// it, or no one decided in time (Reason says which, Message who or
	// how long).
	NotApproved bool
	// Reason and Message are the Finished condition's, "" before it.
	Reason, Message string
}

// EndOf is how j ended; see End.
func EndOf(j *shellv1alpha1.ShellJob) End {
	e := End{ExitCode: -1, Ran: j.Status.Ran}
	if j.Status.ExitCode != nil {
		e.ExitCode = int(*j.Status.ExitCode)
	}
	if c := meta.FindStatusCondition(j.Status.Conditions, shellv1alpha1.ShellJobFinished); c != nil && c.Status == metav1.ConditionTrue {
		e.Reason, e.Message = c.Reason, c.Message
	}
	e.Stopped = IsStopped(j)
	e.TimedOut = j.Status.StopReason == shellv1alpha1.StopReasonTimeout
	if j.Spec.Stop && e.Stopped {
		e.Stop = RequestedStopReason(j)
		e.StopBy = Stopper(j)
	}
	e.NotApproved = IsNotApproved(j)
	if !e.Ran && e.Stop == "" && !e.NotApproved {
		e.Ran = true // a start that failed: show what it wrote and its code
	}
	return e
}

// ByWorker tells whether the job ended because of its worker, or of its
// hold, rather than by itself or a stop: the final says why (Message).
// gone says the worker may have gone with the output, so that it may not
// be read to its end.
func (e End) ByWorker() (byWorker, gone bool) {
	switch e.Reason {
	case shellv1alpha1.ShellJobFinishedReasonHoldTimedOut:
		return true, false
	case shellv1alpha1.ShellJobFinishedReasonWorkerLost, shellv1alpha1.ShellJobFinishedReasonWorkerEvicted,
		shellv1alpha1.ShellJobFinishedReasonOutOfMemory:
		return true, true
	}
	return false, false
}
