package bot

import (
	"context"
	"errors"
	"io"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/shelljob"
)

// ErrJobExists is wrapped by a Submit whose command already has its job:
// the command was handled before.
var ErrJobExists = errors.New("the command's job already exists")

// JobSubmitter creates ShellJobs.
type JobSubmitter interface {
	// Submit creates job name (shelljob.TelegramName; "" for a generated
	// name) with spec and annotations, and returns it with its UID set.
	// When job name exists, Submit returns it with an error wrapping
	// ErrJobExists.
	Submit(ctx context.Context, name string, spec shellv1alpha1.ShellJobSpec, annotations map[string]string) (*shellv1alpha1.ShellJob, error)
}

// JobWatcher follows a job.
type JobWatcher interface {
	// Watch calls fn with the job as it is now and after each change, until
	// ctx ends (it returns ctx's error) or the job is deleted (nil).
	Watch(ctx context.Context, name string, fn func(*shellv1alpha1.ShellJob)) error
}

// JobStopper asks jobs to stop.
type JobStopper interface {
	// Stop asks the job to stop with reason, as shelljob.Stop does, and
	// returns the outcome and the job as the API server has it now (nil
	// for a job that is gone).
	Stop(ctx context.Context, name string, reason shellv1alpha1.StopReason) (shelljob.StopOutcome, *shellv1alpha1.ShellJob, error)
}

// HoldReleaser lets a held job start.
type HoldReleaser interface {
	// Release clears spec.hold.
	Release(ctx context.Context, name string) error
}

// JobAnnotator writes the bot's bookkeeping on its jobs.
type JobAnnotator interface {
	// Annotate sets annotation key of job name to value.
	Annotate(ctx context.Context, name, key, value string) error
}

// JobLister lists the bot's jobs.
type JobLister interface {
	// List returns the jobs that came from Telegram.
	List(ctx context.Context) ([]shellv1alpha1.ShellJob, error)
}

// PoolRestarter restarts shell pools.
type PoolRestarter interface {
	// RestartPool bumps the pool's spec.restartedAt: new workers come up,
	// and the old ones take no new jobs.
	RestartPool(ctx context.Context, pool string) error
}

// ErrWorkerGone is wrapped by a Follow, FollowText or GetFiles that can
// never succeed: the job's output and files are lost, its worker pod gone
// or replaced by another of its name, or its spool removed.
var ErrWorkerGone = errors.New("the job's worker pod is gone")

// OutputFollower streams a job's output.
type OutputFollower interface {
	// Follow copies the output of job from byte offset to w until the
	// output is closed, and returns the offset reached, as
	// agentapi.Client.Follow does. With agentapi.AwaitStart it waits for
	// the job's start, wherever the job is placed, and follows it from 0,
	// so that it may be called as soon as the job exists; the output of a
	// job that ends without running is empty. A broken stream is followed
	// again from the offset it reached, until ctx ends. It fails at once
	// when the output can no longer be read, with an error wrapping
	// ErrWorkerGone, or when the cluster refuses it.
	Follow(ctx context.Context, job *shellv1alpha1.ShellJob, offset int64, w io.Writer) (int64, error)
	// FollowText writes the job's output from its start to w as its final
	// shows it, in mode, made on the worker (agentapi.Client.FollowText),
	// with Follow's errors. A stream cut after its first byte fails: read
	// it again from its start.
	FollowText(ctx context.Context, job *shellv1alpha1.ShellJob, mode agentapi.TextMode, w io.Writer) error
}

// FileMover moves the files of a job's $SHELLJOB_OUT, by the job's name.
type FileMover interface {
	// PutFiles unpacks the tar stream into the $SHELLJOB_OUT of job, held
	// (spec.hold) and not started: its input files.
	PutFiles(ctx context.Context, job string, tar io.Reader) error
	// GetFiles writes the $SHELLJOB_OUT of job, which started, to w as a
	// tar stream; a broken stream goes on from where it was cut. It fails
	// with an error wrapping ErrWorkerGone when the files are lost.
	GetFiles(ctx context.Context, job string, w io.Writer) error
}

// Cluster is everything the bot asks of the cluster.
type Cluster interface {
	JobSubmitter
	JobWatcher
	JobStopper
	HoldReleaser
	JobAnnotator
	JobLister
	PoolRestarter
	OutputFollower
	FileMover
}
