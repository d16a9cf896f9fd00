package shelljob

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

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
// on the job's pool, or who wrote the job. The patch carries the job's
// resource version: a decision that races with another is decided again.
func Decide(ctx context.Context, jobs JobPatcher, name string, a shellv1alpha1.ShellJobApproval) (DecideOutcome, *shellv1alpha1.ShellJob, error) {
	for {
		j, err := jobs.Get(ctx, name)
		if apierrors.IsNotFound(err) {
			return DecideAlreadyEnded, nil, nil
		}
		if err != nil {
			return 0, nil, fmt.Errorf("get shelljob %s: %w", name, err)
		}
		switch {
		case j.Spec.Approval != nil:
			return AlreadyDecided, j, nil
		case IsFinished(j):
			return DecideAlreadyEnded, j, nil
		}
		patch, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": j.ResourceVersion},
			"spec":     map[string]any{"approval": a},
		})
		if err != nil {
			return 0, nil, err
		}
		j, err = jobs.MergePatch(ctx, name, patch)
		switch {
		case err == nil:
			return Decided, j, nil
		case apierrors.IsNotFound(err):
			return DecideAlreadyEnded, nil, nil
		case !apierrors.IsConflict(err):
			return 0, nil, err
		}
	}
}
