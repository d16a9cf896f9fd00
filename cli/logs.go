package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/spf13/cobra"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/shelljob"
)

// logsQuiet is how long logs without -f waits for more output of a running
// job before it takes what came as all there is so far.
const logsQuiet = 300 * time.Millisecond

// LogsOptions are the options of the logs command.
type LogsOptions struct {
	*Options
	Follow bool
	Job    string
}

// NewLogsCmd returns the logs command.
func NewLogsCmd(o *Options) *cobra.Command {
	l := &LogsOptions{Options: o}
	cmd := &cobra.Command{
		Use:   "logs [-f] JOB",
		Short: "Print a job's output",
		Long: `Prints the output of a job, named or numbered (N or #N), from the spool of its
worker. With -f, it follows the output until the job ends, and resumes from
where it was when the stream is cut.`,
		Example:               `  kubectl shelljob logs -f 12`,
		DisableFlagsInUseLine: true,
		Args:                  cobra.ExactArgs(1),
		ValidArgsFunction:     completeJobs(o, false),
		RunE: func(cmd *cobra.Command, args []string) error {
			cmd.SilenceUsage = true
			l.Job = args[0]
			return l.Run(cmd.Context())
		},
	}
	cmd.Flags().BoolVarP(&l.Follow, "follow", "f", false, "follow the output until the job ends")
	return cmd
}

// Run prints the output.
func (l *LogsOptions) Run(ctx context.Context) error {
	c, err := l.Cluster()
	if err != nil {
		return err
	}
	j, err := c.getJob(ctx, l.Job)
	if err != nil {
		return err
	}
	if !shelljob.IsStarted(j) || j.Status.Pod == "" {
		if !l.Follow {
			if shelljob.IsFinished(j) {
				return fmt.Errorf("#%d never ran", j.Status.Number)
			}
			return fmt.Errorf("#%d has not started yet", j.Status.Number)
		}
		var started *shellv1alpha1.ShellJob
		if err := c.watchJob(ctx, j, func(x *shellv1alpha1.ShellJob) bool {
			started = x
			return (shelljob.IsStarted(x) && x.Status.Pod != "") || shelljob.IsFinished(x)
		}); err != nil {
			return err
		}
		if !shelljob.IsStarted(started) {
			return fmt.Errorf("#%d never ran", j.Status.Number)
		}
		j = started
	}
	r := &runner{cluster: c, IOStreams: l.IOStreams}
	if l.Follow || shelljob.IsFinished(j) {
		finished := shelljob.IsFinished(j)
		return r.follow(ctx, c.workerPod(j), string(j.UID), l.Out, func() bool { return finished })
	}
	// A running job's output so far: the follow would wait for its end,
	// so it ends once the stream has been quiet for a moment.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	q := &quietWriter{w: l.Out, wrote: make(chan struct{}, 1)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = r.follow(ctx, c.workerPod(j), string(j.UID), q, nil)
	}()
	for {
		select {
		case <-done:
			return q.err()
		case <-q.wrote:
		case <-time.After(logsQuiet):
			cancel()
			<-done
			if err := q.err(); err != nil && !errors.Is(err, context.Canceled) {
				return err
			}
			return nil
		}
	}
}

// quietWriter passes writes on and signals each.
type quietWriter struct {
	w     io.Writer
	wrote chan struct{}
	mu    sync.Mutex
	e     error
}

func (q *quietWriter) Write(p []byte) (int, error) {
	n, err := q.w.Write(p)
	if err != nil {
		q.mu.Lock()
		q.e = err
		q.mu.Unlock()
	}
	select {
	case q.wrote <- struct{}{}:
	default:
	}
	return n, err
}

func (q *quietWriter) err() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.e
}
