package bot

import (
	"context"
	"errors"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/liveoutput"
)

// startFollow starts the job's follower in the bot's set, under ctx. It
// returns stop, which cancels the follower and waits until it ended, and
// followed, closed once it ended. A job the set follows already (a second
// pump of it) is not followed again: its final says the output was cut.
func (r *run) startFollow(ctx context.Context) (stop func(), followed <-chan struct{}) {
	f, err := r.b.followers.Start(ctx, r.job.Name, r.follow)
	if err != nil {
		r.b.cfg.Log.Error(err, "The job's output is not followed", "job", r.job.Name)
		none := make(chan struct{})
		close(none)
		return func() {}, none
	}
	return f.Stop, f.Done()
}

// follow copies the job's output into the buffer, from its start, or from
// followFrom for a job taken over after a restart of the bot, and returns
// when the output is closed, can no longer be read, or ctx ended. The
// cluster's follow waits for the start, follows the job wherever it is
// placed, and resumes a broken stream from where it was cut: nothing is
// left for the bot to try again.
func (r *run) follow(ctx context.Context) {
	obj, ok := r.observed(ctx)
	if !ok {
		return
	}
	from := r.followFrom
	if from == 0 {
		// Opened at once, the follow overlaps the job's placement and its
		// start: it is held until the command runs.
		from = agentapi.AwaitStart
	}
	_, err := r.b.cluster.Follow(ctx, obj, from, r.buf.Writer(liveoutput.Stdout))
	switch {
	case err == nil:
		r.complete.Store(true)
	case ctx.Err() != nil:
	case errors.Is(err, ErrWorkerGone):
		r.b.cfg.Log.Info("The output can no longer be read: its worker is gone", "job", r.job.Name, "error", err.Error())
	default:
		r.b.cfg.Log.Error(err, "Could not read the job's output", "job", r.job.Name)
	}
}

// observed waits until the job's watch has seen it, and tells false if ctx
// ended first.
func (r *run) observed(ctx context.Context) (*shellv1alpha1.ShellJob, bool) {
	for {
		obj, next := r.watchObj()
		if obj != nil {
			return obj, true
		}
		select {
		case <-next:
		case <-ctx.Done():
			return nil, false
		}
	}
}
