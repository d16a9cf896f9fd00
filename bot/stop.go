package bot

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/bot/jobs"
	"shelljob.dev/shelljob/internal/kubeutil"
	"shelljob.dev/shelljob/internal/shelljob"
	"shelljob.dev/shelljob/internal/texts"
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

// stopRetry spaces a stop's tries as StopTries and StopRetry say.
var stopRetry = wait.Backoff{Duration: StopRetry, Factor: 2, Steps: StopTries}

// stopAs asks j's ShellJob to stop, as .k, a Stop button and a draft's
// Stop do, in the name of the chat admin tg (reason User), as their
// identity: the API server decides whether they may (their own job, or
// the stop right on its pool).
func (b *Bot) stopAs(ctx context.Context, j *jobs.Job, tg int64) (shelljob.StopOutcome, error) {
	return b.stopJob(ctx, j, func(ctx context.Context) (shelljob.StopOutcome, error) {
		out, _, err := b.as(tg).Stop(ctx, j.Name)
		return out, err
	})
}

// stopOffline asks j's ShellJob to stop as the bot itself, with reason
// Shutdown: the bot is going offline.
func (b *Bot) stopOffline(ctx context.Context, j *jobs.Job) (shelljob.StopOutcome, error) {
	return b.stopJob(ctx, j, func(ctx context.Context) (shelljob.StopOutcome, error) {
		out, _, err := b.cluster.Stop(ctx, j.Name, shellv1alpha1.StopReasonShutdown)
		return out, err
	})
}

// stopJob makes the stop of j that stop makes, and returns what the API
// server made of it, trying again after a passing error. The preview's
// header follows the ShellJob once the bot's cache has the stop.
func (b *Bot) stopJob(ctx context.Context, j *jobs.Job, stop func(context.Context) (shelljob.StopOutcome, error)) (shelljob.StopOutcome, error) {
	p := Patience{Backoff: stopRetry, Clock: b.cfg.Clock, Passing: kubeutil.IsPassing}
	try := 0
	var out shelljob.StopOutcome
	err := p.Retry(ctx, func() (err error) {
		try++
		if out, err = stop(ctx); err != nil {
			b.cfg.Log.V(1).Info("Could not stop a job", "job", j.Name, "try", try, "error", err.Error())
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	return out, nil
}

// stopFailed says that a stop of j failed: in the words of the admission
// policy that refused it ("it is alice's job; ..."), or with the error,
// which a later .k may not meet.
func stopFailed(j *jobs.Job, err error) string {
	if why, ok := shelljob.Refusal(err); ok {
		return texts.StopRefused(j.Number(), j.Name, why)
	}
	return texts.StopFailed(j.Number(), err)
}
