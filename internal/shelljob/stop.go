package shelljob

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
)

// StopOutcome is what asking a job to stop did: the bot's .k and
// `kubectl shelljob stop` both tell it with Text.
type StopOutcome int

const (
	// StopSent: the job ran, and is now asked to stop.
	StopSent StopOutcome = iota
	// StopNotStarted: the job had not started, and now never will.
	StopNotStarted
	// StopAlreadyRequested: an earlier stop stands.
	StopAlreadyRequested
	// StopAlreadyEnded: the command has ended (or the job is gone).
	StopAlreadyEnded
)

// Text is how the outcome of stopping job #n reads: "⏹ Stopping #3…",
// "#3 is already stopping." or "#3 has already ended.".
func (o StopOutcome) Text(n int64) string {
	switch o {
	case StopSent, StopNotStarted:
		return fmt.Sprintf("⏹ Stopping #%d…", n)
	case StopAlreadyRequested:
		return fmt.Sprintf("#%d is already stopping.", n)
	case StopAlreadyEnded:
		return fmt.Sprintf("#%d has already ended.", n)
	default:
		panic(fmt.Sprintf("shelljob: unknown stop outcome %d", o))
	}
}

// DecideStop is what a stop of j would do. Only StopSent and
// StopNotStarted change the job: a stop is one-way, and an ended job has
// nothing left to stop.
func DecideStop(j *shellv1alpha1.ShellJob) StopOutcome {
	switch {
	case IsFinished(j):
		return StopAlreadyEnded
	case IsStopRequested(j):
		return StopAlreadyRequested
	case !IsStarted(j):
		return StopNotStarted
	default:
		return StopSent
	}
}

// JobPatcher reads and patches the ShellJobs of one namespace, by name.
type JobPatcher interface {
	Get(ctx context.Context, name string) (*shellv1alpha1.ShellJob, error)
	// MergePatch applies a JSON merge patch and returns the job as patched.
	MergePatch(ctx context.Context, name string, patch []byte) (*shellv1alpha1.ShellJob, error)
}

// Stop asks the job named name to stop for reason, unless DecideStop says
// there is nothing to do, and returns the outcome and the job as it is
// now. by, when set, names the stopper (spec.stopBy), who must be the
// caller: the API server refuses any other name, and fills in the caller
// itself where it can (Kubernetes 1.36 and later) when by is "". The
// decision is made on a fresh read of the job, and the patch carries its
// resource version: a stop that races with another fails with a conflict
// and is decided again, so a stop's reason is never changed. A job that
// is gone has ended.
func Stop(ctx context.Context, jobs JobPatcher, name string, reason shellv1alpha1.StopReason, by string) (StopOutcome, *shellv1alpha1.ShellJob, error) {
	var out StopOutcome
	j, err := patchFresh(ctx, jobs, name, func(j *shellv1alpha1.ShellJob) map[string]any {
		if out = DecideStop(j); out != StopSent && out != StopNotStarted {
			return nil
		}
		fields := map[string]any{"stop": true, "stopReason": reason}
		if by != "" {
			fields["stopBy"] = by
		}
		return fields
	})
	switch {
	case errors.Is(err, errGone):
		return StopAlreadyEnded, nil, nil
	case err != nil:
		return 0, nil, fmt.Errorf("stop shelljob %s: %w", name, err)
	}
	return out, j, nil
}

// errGone: the job is gone.
var errGone = errors.New("the job is gone")

// patchFresh reads the job named name, asks spec what to merge into its
// spec (nil for nothing), and patches it with the version it read; on a
// conflict it reads and asks again. It returns the job as it is now, and
// errGone once the job is gone.
func patchFresh(ctx context.Context, jobs JobPatcher, name string, spec func(*shellv1alpha1.ShellJob) map[string]any) (*shellv1alpha1.ShellJob, error) {
	for {
		j, err := jobs.Get(ctx, name)
		if apierrors.IsNotFound(err) {
			return nil, errGone
		}
		if err != nil {
			return nil, fmt.Errorf("get shelljob %s: %w", name, err)
		}
		fields := spec(j)
		if fields == nil {
			return j, nil
		}
		patch, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": j.ResourceVersion},
			"spec":     fields,
		})
		if err != nil {
			return nil, err
		}
		j, err = jobs.MergePatch(ctx, name, patch)
		switch {
		case err == nil:
			return j, nil
		case apierrors.IsNotFound(err):
			return nil, errGone
		case !apierrors.IsConflict(err):
			return nil, err
		}
	}
}
