package bot

import (
	"context"
	"time"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/bot/jobs"
	"shelljob.dev/shelljob/internal/kubeutil"
	"shelljob.dev/shelljob/internal/shelljob"
)

// A stop whose patch failed for a passing reason (the API server busy or
// unreachable, a timeout) is tried StopTries times in all, StopRetry apart
// at first and twice as long after each failure: about 3.5 s before the
// chat is told. A refusal (Forbidden, Invalid) is told at once. Either way
// the bot keeps nothing of the stop: a later .k tries again.
const (
	StopTries = 4
	StopRetry = 500 * time.Millisecond
)

// stopJob asks j's ShellJob to stop for reason, as .k, a Stop button, a
// draft's Stop and a shutdown do, and returns what the API server made of
// it. The preview's header follows the ShellJob once the bot's cache has
// the stop.
func (b *Bot) stopJob(ctx context.Context, j *jobs.Job, reason shellv1alpha1.StopReason) (shelljob.StopOutcome, error) {
	wait := StopRetry
	for try := 1; ; try++ {
		out, _, err := b.cluster.Stop(ctx, j.Name, reason)
		if err == nil {
			return out, nil
		}
		if try == StopTries || !kubeutil.IsPassing(err) || ctx.Err() != nil {
			return 0, err
		}
		b.cfg.Log.V(1).Info("Could not stop a job; trying again", "job", j.Name, "try", try, "error", err.Error())
		select {
		case <-b.cfg.Clock.After(wait):
		case <-ctx.Done():
			return 0, err
		}
		wait *= 2
	}
}
