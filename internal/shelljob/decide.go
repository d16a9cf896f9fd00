package shelljob

import (
	"context"
	"errors"
	"fmt"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
)

// DecideOutcome is what a decision on a job's approval did: the bot's
// buttons and `kubectl shelljob approve` and `deny` tell it with Text.
type DecideOutcome int

const (
	// Decided: the decision is recorded.
	Decided DecideOutcome = iota
	// AlreadyDecided: an earlier decision stands (Job.Spec.Approval).
	AlreadyDecided
	// DecideAlreadyEnded: the job has ended (or is gone).
	DecideAlreadyEnded
)

// Text is how the outcome of deciding d on job j (#n) reads: "✅ Approved
// #3.", "⛔ Denied #3.", "#3 was already approved by bob.", "#3 has
// already ended.".
func (o DecideOutcome) Text(j *shellv1alpha1.ShellJob, n int64, d shellv1alpha1.ApprovalDecision) string {
	switch o {
	case Decided:
		if d == shellv1alpha1.ApprovalDenied {
			return fmt.Sprintf("⛔ Denied #%d.", n)
		}
		return fmt.Sprintf("✅ Approved #%d.", n)
	case AlreadyDecided:
		verb := "approved"
		if j != nil && j.Spec.Approval != nil && j.Spec.Approval.Decision == shellv1alpha1.ApprovalDenied {
			verb = "denied"
		}
		by := ""
		if j != nil && j.Spec.Approval != nil {
			by = " by " + j.Spec.Approval.By
		}
		return fmt.Sprintf("#%d was already %s%s.", n, verb, by)
	case DecideAlreadyEnded:
		return StopAlreadyEnded.Text(n)
	default:
		panic(fmt.Sprintf("shelljob: unknown decide outcome %d", o))
	}
}

// Decide records a's decision on the approval of the job named name,
// unless it has one already or has ended, and returns the outcome and the
// job as it is now. a.By must be the caller's user name (and
// a.TelegramUser, when set, the Telegram user the caller acts for): the
// admission policies refuse any other, and a caller who may not approve
// on the job's pool, or who wrote the job; their refusal comes back as it
// is. The patch carries the job's resource version: a decision that races
// with another is decided again.
func Decide(ctx context.Context, jobs JobPatcher, name string, a shellv1alpha1.ShellJobApproval) (DecideOutcome, *shellv1alpha1.ShellJob, error) {
	var out DecideOutcome
	j, err := patchFresh(ctx, jobs, name, func(j *shellv1alpha1.ShellJob) map[string]any {
		switch {
		case j.Spec.Approval != nil:
			out = AlreadyDecided
		case IsFinished(j):
			out = DecideAlreadyEnded
		default:
			out = Decided
			return map[string]any{"approval": a}
		}
		return nil
	})
	switch {
	case errors.Is(err, errGone):
		return DecideAlreadyEnded, nil, nil
	case err != nil:
		// The API server's refusal, as it is.
		return 0, nil, err
	}
	return out, j, nil
}
