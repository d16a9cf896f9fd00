package bot

import (
	"context"
	"errors"
	"io"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/identity"
	"shelljob.dev/shelljob/internal/shelljob"
)

// ErrJobExists is wrapped by a Submit whose job name is taken: by the
// command's own job (the command was handled before), or by anything
// else (shelljob.SameCommand tells).
var ErrJobExists = errors.New("the command's job name is taken")

// Person is what the bot does on a chat admin's behalf, as them: the API
// server authenticates, authorizes, admits and audits each request as the
// admin's identity (Cluster.As), never as the bot.
type Person interface {
	// Submit creates job name (shelljob.TelegramName; "" for a generated
	// name) with spec and annotations, and returns it with its UID set.
	// When job name exists, Submit returns the object of that name with
	// an error wrapping ErrJobExists, whatever it is.
	Submit(ctx context.Context, name string, spec shellv1alpha1.ShellJobSpec, annotations map[string]string) (*shellv1alpha1.ShellJob, error)
	// Stop asks the job to stop with reason User, in the admin's name
	// (spec.stopBy), as shelljob.Stop does, and returns the outcome and
	// the job as the API server has it now (nil for a job that is gone).
	Stop(ctx context.Context, name string) (shelljob.StopOutcome, *shellv1alpha1.ShellJob, error)
	// Release clears spec.hold.
	Release(ctx context.Context, name string) error
	// RestartPool bumps the pool's spec.restartedAt: new workers come up,
	// and the old ones take no new jobs.
	RestartPool(ctx context.Context, pool string) error
	// Decide records the admin's decision on the job's approval, as
	// shelljob.Decide does.
	Decide(ctx context.Context, name string, decision shellv1alpha1.ApprovalDecision) (shelljob.DecideOutcome, *shellv1alpha1.ShellJob, error)
}

// JobWatcher follows a job.
type JobWatcher interface {
	// Watch calls fn with the job as it is now and after each change, until
	// ctx ends (it returns ctx's error) or the job is deleted (nil).
	Watch(ctx context.Context, name string, fn func(*shellv1alpha1.ShellJob)) error
}

// JobStopper asks jobs to stop, as the bot itself: only with reason
// Shutdown, as the bot goes offline (the chart's policies refuse it any
// other stop).
type JobStopper interface {
	// Stop asks the job to stop with reason, as shelljob.Stop does, and
	// returns the outcome and the job as the API server has it now (nil
	// for a job that is gone).
	Stop(ctx context.Context, name string, reason shellv1alpha1.StopReason) (shelljob.StopOutcome, *shellv1alpha1.ShellJob, error)
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

// PoolReader reads shell pools.
type PoolReader interface {
	// Pool returns the pool named name.
	Pool(ctx context.Context, name string) (*shellv1alpha1.ShellPool, error)
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

// Cluster is everything the bot asks of the cluster. As itself it keeps
// its bookkeeping on the jobs, follows them and their output, reads the
// pools, and stops jobs as it goes offline; everything a chat admin asks
// for it does as them (As).
type Cluster interface {
	JobWatcher
	JobStopper
	JobAnnotator
	JobLister
	PoolReader
	OutputFollower
	FileMover
	// As is the cluster acting for the chat admin of identity id.
	As(id identity.Identity) Person
}
