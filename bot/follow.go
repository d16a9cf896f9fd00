package bot

import (
	"context"
	"errors"
	"sync"
	"time"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/liveoutput"
	"shelljob.dev/shelljob/internal/shelljob"
)

// FollowRetry is the wait before following a job's output again after the
// stream broke; the follow resumes from the byte it reached. The wait
// doubles while the streams read nothing, up to FollowRetryMax, so that a
// worker that cannot be reached is not asked once a second.
const (
	FollowRetry    = time.Second
	FollowRetryMax = 30 * time.Second
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

// follow copies the job's output into the buffer once it runs, resuming
// after a broken stream, and returns when the output is closed, the job
// ended without running, or ctx ended.
func (r *run) follow(ctx context.Context) {
	// offset counts the bytes the command wrote up to where the stream
	// reached, as the agent does. It is not what the buffer got: a gap
	// in the spool comes as one line in place of the bytes it skipped.
	offset := r.followFrom
	retry := FollowRetry
	for {
		obj, ok := r.placed(ctx)
		if !ok {
			return
		}
		from, fctx, cancel := offset, ctx, context.CancelFunc(func() {})
		var watched sync.WaitGroup
		if !obj.Status.Ran && offset == 0 {
			// Opened as soon as the job is placed, the follow overlaps the
			// start: the agent holds it until the command runs.
			from = agentapi.AwaitStart
			fctx, cancel = context.WithCancel(ctx)
			watched.Go(func() { r.cancelUnlessStarted(fctx, cancel, obj.Status.Pod) })
		}
		reached, err := r.b.cluster.Follow(fctx, r.latest(), from, r.buf.Writer(liveoutput.Stdout))
		moved := fctx.Err() != nil && ctx.Err() == nil
		cancel()
		// The follower ends with the watch it started.
		watched.Wait()
		if reached > offset {
			offset, retry = reached, FollowRetry
		}
		if err == nil {
			r.complete.Store(true)
			return
		}
		if ctx.Err() != nil {
			return
		}
		if moved {
			continue // placed again, or ended without running
		}
		if errors.Is(err, ErrWorkerGone) {
			r.b.cfg.Log.Info("The output can no longer be read: its worker is gone", "job", r.job.Name, "error", err.Error())
			return
		}
		r.b.cfg.Log.V(1).Info("Output stream broke; following again", "job", r.job.Name, "error", err.Error())
		select {
		case <-r.b.cfg.Clock.After(retry):
		case <-ctx.Done():
			return
		}
		retry = min(2*retry, FollowRetryMax)
	}
}

// placed waits until the job has a worker, and tells false if it ended
// without running, or ctx ended, first.
func (r *run) placed(ctx context.Context) (*shellv1alpha1.ShellJob, bool) {
	for {
		obj, next := r.watchObj()
		switch {
		case obj != nil && shelljob.IsFinished(obj) && !obj.Status.Ran:
			return nil, false
		case obj != nil && obj.Status.Pod != "":
			return obj, true
		}
		select {
		case <-next:
		case <-ctx.Done():
			return nil, false
		}
	}
}

// cancelUnlessStarted cancels a follow that awaits the job's start on pod
// once the job is placed elsewhere (its worker was lost before the start)
// or ends without running.
func (r *run) cancelUnlessStarted(ctx context.Context, cancel context.CancelFunc, pod string) {
	for {
		obj, next := r.watchObj()
		switch {
		case obj == nil:
		case obj.Status.Ran && obj.Status.Pod == pod:
			return
		case obj.Status.Pod != pod || shelljob.IsFinished(obj):
			cancel()
			return
		}
		select {
		case <-next:
		case <-ctx.Done():
			return
		}
	}
}
