package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"shelljob.dev/shelljob/internal/agentapi"
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
worker, through the stream API (the log subresource of ShellJobs in
stream.shelljob.dev): any job with get on shelljobs/log, else a job of
one's own through myshelljobs/log. With -f, it follows the output until the job ends, waiting
for a job that has not started, and resumes from where it was when the
stream is cut.`,
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
	if !l.Follow && shelljob.IsStarting(j) {
		// Its start's record comes next: an exec that just ended may
		// come first.
		if j, err = c.startRecorded(ctx, j); err != nil {
			return err
		}
	}
	read := namedJob{anyJob: c.AnyStream, own: c.Stream}
	started := shelljob.IsStarted(j)
	switch {
	case !started && !l.Follow && shelljob.IsFinished(j):
		return fmt.Errorf("#%d never ran", j.Status.Number)
	case !started && !l.Follow:
		return fmt.Errorf("#%d has not started yet", j.Status.Number)
	case l.Follow || shelljob.IsFinished(j):
		from := int64(0)
		if !started {
			// Followed from its start, once it starts.
			from = agentapi.AwaitStart
		}
		if _, err := read.follow(ctx, j.Name, from, l.Out); err != nil || started {
			return err
		}
		// The output of a job that ended without running is empty.
		if j, err = c.Jobs.Get(ctx, j.Name, metav1.GetOptions{}); err == nil && !shelljob.IsStarted(j) {
			err = fmt.Errorf("#%d never ran", j.Status.Number)
		}
		return err
	}
	// A running job's output so far: the follow would wait for its end,
	// so it ends once the stream has been quiet for a moment.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	q := &quietWriter{w: l.Out, wrote: make(chan struct{}, 1)}
	done := make(chan error, 1)
	go func() {
		_, err := read.follow(ctx, j.Name, 0, q)
		done <- err
	}()
	for {
		select {
		case err := <-done:
			return cmp.Or(q.err(), err)
		case <-q.wrote:
		case <-time.After(logsQuiet):
			cancel()
			followErr := <-done
			if err := cmp.Or(q.err(), followErr); !errors.Is(err, context.Canceled) {
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
