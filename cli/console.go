package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/shelljob"
	"shelljob.dev/shelljob/internal/texts"
)

// PipedEOFGrace is how long a console with a piped stdin keeps the stream
// open after it sent "exit\n" at EOF, so that the shell's goodbye text
// still arrives, before it closes the stream itself, so that the command
// never hangs on a shell that does not exit.
const PipedEOFGrace = 500 * time.Millisecond

// PipedStartWait is the longest a console with a piped stdin holds the
// input back waiting for the remote shell's first output (its prompt). A
// shell that is slow to start would otherwise get all the input and the
// exit, and the grace would close the stream before it ran any of it.
const PipedStartWait = 10 * time.Second

// pipedExit is what a piped console sends at EOF. A bare Ctrl-D would be a
// literal character to a shell that is not at a prompt yet; exit ends it.
const pipedExit = "exit\n"

// defaultTerm is the console's TERM when the local one is unset.
const defaultTerm = "xterm-256color"

// ConsoleOptions are the options of the console command.
type ConsoleOptions struct {
	*Options
	Pool string

	// piped is true when stdin is not a terminal.
	piped bool
}

// NewConsoleCmd returns the console command.
func NewConsoleCmd(o *Options) *cobra.Command {
	c := &ConsoleOptions{Options: o}
	cmd := &cobra.Command{
		Use:   "console [--pool P]",
		Short: "Open a shell with a terminal, as a job of its own on a worker",
		Long: `Opens the pool's shell with a terminal, as kubectl exec -it does, in a job
of its own: a ShellJob of mode Console, which runs on a free worker of the
pool as a user of its own, isolated as every job is, and is numbered, listed
and stoppable like any other. The terminal is reached through the Kubernetes
API (the attach subresource of ShellJobs), never by an exec into the worker.
The local terminal goes into raw mode and the window size follows it. The
console ends with its shell; a session cut before that hangs the shell up.

With a piped standard input, the input is forwarded once the shell has
printed its prompt; at its end the console sends "exit" and closes the
stream itself half a second later. On a terminal, Ctrl-D goes to the remote
shell.`,
		Example: `  kubectl shelljob console --pool shell
  echo 'uptime' | kubectl shelljob console`,
		DisableFlagsInUseLine: true,
		Args:                  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SilenceUsage = true
			c.Complete()
			return c.Run(cmd.Context())
		},
	}
	addPoolFlag(cmd, o, &c.Pool)
	return cmd
}

// Complete tells a terminal from a pipe.
func (c *ConsoleOptions) Complete() { c.piped = !isTerminal(c.In) }

// Run creates the console's job, attaches to it once it is placed, and
// ends with the exit status of its shell. The job is marked delivered
// when the session ends.
func (c *ConsoleOptions) Run(ctx context.Context) error {
	cl, err := c.Cluster()
	if err != nil {
		return err
	}
	pool, err := cl.Pools.Get(ctx, c.Pool, metav1.GetOptions{})
	if err != nil {
		return err
	}
	interrupts, stopInterrupts := c.Interrupts()
	defer stopInterrupts()
	r := &runner{cluster: cl, IOStreams: c.IOStreams, interrupts: interrupts, clock: c.Clock}
	command := consoleCommand(cmp.Or(pool.Spec.Shell, agentapi.DefaultShell), cmp.Or(os.Getenv("TERM"), defaultTerm))
	created, err := r.create(ctx, jobRequest{Command: command, Mode: shellv1alpha1.ModeConsole, Pool: c.Pool})
	if err != nil {
		return err
	}
	j, code, err := r.awaitPlacement(ctx, created)
	if err != nil || j == nil {
		// It never ran: stopped, or ended, while queued.
		return cmp.Or(err, exitCodeOrNil(code))
	}
	stopInterrupts()
	err = c.session(ctx, cl.Stream, j)
	markErr := cl.markDelivered(context.WithoutCancel(ctx), j.Name, c.Clock.Now())
	var exit utilexec.ExitError
	switch {
	case errors.As(err, &exit):
		err = exitCode(exit.ExitStatus())
	case err != nil:
		// No session, or a broken one: the console goes now rather than
		// when the agent finds it alone.
		if _, stopErr := cl.stopJob(context.WithoutCancel(ctx), j.Name); stopErr != nil {
			fmt.Fprintln(c.ErrOut, "warning:", stopErr)
		}
		err = fmt.Errorf("attach to the console of #%d: %w", j.Status.Number, err)
	}
	if markErr != nil {
		fmt.Fprintln(c.ErrOut, "warning:", markErr)
	}
	return err
}

// consoleCommand is a console's command: the pool's shell as a login
// shell, interactive on the job's terminal, which is of type term.
func consoleCommand(shell, termName string) string {
	return "TERM=" + shellWord(termName) + " exec " + shellWord(shell) + " -l"
}

// plainWord is a word the shell takes as it is.
var plainWord = regexp.MustCompile(`^[A-Za-z0-9_./+,:@%=-]+$`)

// shellWord quotes s for the shell when it needs it.
func shellWord(s string) string {
	if plainWord.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// awaitPlacement waits until sj has a worker, and returns it then. A job
// that ends before (stopped by someone, or by Ctrl-C here, which stops it)
// is marked delivered, and its exit code returned with a nil job.
func (r *runner) awaitPlacement(ctx context.Context, sj *shellv1alpha1.ShellJob) (*shellv1alpha1.ShellJob, int, error) {
	jobs := make(chan *shellv1alpha1.ShellJob, 1)
	watchErr := make(chan error, 1)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		watchErr <- r.cluster.watchJob(wctx, sj, func(j *shellv1alpha1.ShellJob) bool {
			select {
			case <-jobs:
			default:
			}
			jobs <- j
			return placed(j) || shelljob.IsFinished(j)
		})
	}()
	queued := false
	for {
		select {
		case <-ctx.Done():
			return nil, 1, ctx.Err()
		case err := <-watchErr:
			if err != nil {
				return nil, 1, err
			}
			watchErr = nil // the last state is in jobs
		case <-r.interrupts:
			outcome, err := r.cluster.stopJob(ctx, sj.Name)
			if err != nil {
				return nil, 1, err
			}
			fmt.Fprintln(r.ErrOut, outcome.Text(sj.Status.Number))
		case j := <-jobs:
			sj = j
			switch {
			case shelljob.IsFinished(j):
				if err := r.cluster.markDelivered(ctx, j.Name, r.clock.Now()); err != nil {
					fmt.Fprintln(r.ErrOut, "warning:", err)
				}
				code, err := r.exitCode(j)
				return nil, code, err
			case placed(j):
				return j, 0, nil
			case !queued && j.Status.Number != 0 && shelljob.IsWaiting(j):
				queued = true
				fmt.Fprintln(r.ErrOut, texts.HeaderQueued(j.Status.Number))
			}
		}
	}
}

// placed tells whether j has a worker to run on: a job stopped before it
// started never runs there.
func placed(j *shellv1alpha1.ShellJob) bool { return j.Status.Pod != "" && !j.Spec.Stop }

// session attaches the console's terminal to the local one until the
// console ends, through the attach subresource of the job in the stream
// API.
func (c *ConsoleOptions) session(ctx context.Context, stream Stream, j *shellv1alpha1.ShellJob) error {
	opts := remotecommand.StreamOptions{Stdout: c.Out, Tty: true}
	if f, ok := c.In.(fder); ok && !c.piped {
		state, err := term.MakeRaw(int(f.Fd()))
		if err != nil {
			return fmt.Errorf("raw mode: %w", err)
		}
		defer func() { _ = term.Restore(int(f.Fd()), state) }()
	}
	if f, ok := c.Out.(fder); ok && isTerminal(c.Out) {
		sizes := newSizeQueue(int(f.Fd()))
		defer sizes.stop()
		opts.TerminalSizeQueue = sizes
	}
	return c.stream(ctx, func(ctx context.Context, opts remotecommand.StreamOptions) error {
		return stream.Attach(ctx, j.Name, opts)
	}, opts)
}

// stream runs attach with the console's stdin. After a piped stdin's
// grace it ends the stream itself and returns nil.
func (c *ConsoleOptions) stream(ctx context.Context, attach func(context.Context, remotecommand.StreamOptions) error, opts remotecommand.StreamOptions) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	in := &consoleInput{r: c.In, piped: c.piped, done: ctx.Done(), eof: make(chan struct{})}
	if c.piped {
		up := &firstOutput{w: opts.Stdout, seen: make(chan struct{})}
		opts.Stdout = up
		in.up = up.seen
	}
	closed := make(chan struct{})
	go func() {
		select {
		case <-in.eof:
		case <-ctx.Done():
			return
		}
		select {
		case <-time.After(PipedEOFGrace):
			close(closed)
			cancel()
		case <-ctx.Done():
		}
	}()
	opts.Stdin = in
	err := attach(ctx, opts)
	select {
	case <-closed:
		return nil // we closed it after the grace
	default:
	}
	return err
}

// consoleInput is the console's stdin. On a pipe, at EOF it sends
// pipedExit once and closes eof; on a terminal EOF belongs to the remote
// shell, so it sends nothing. Either way it then holds the stream open
// until done: an ended stdin would end the stream, and hang the console
// up, before the shell's last output came back.
type consoleInput struct {
	r     io.Reader
	piped bool
	done  <-chan struct{}
	eof   chan struct{}

	// up, until the first Read, is closed by the remote shell's first
	// output; the input waits for it, at most PipedStartWait.
	up <-chan struct{}

	once sync.Once
	sent bool
}

func (in *consoleInput) Read(p []byte) (int, error) {
	if in.up != nil {
		t := time.NewTimer(PipedStartWait)
		select {
		case <-in.up:
		case <-t.C:
		case <-in.done:
		}
		t.Stop()
		in.up = nil
	}
	if !in.sent {
		n, err := in.r.Read(p)
		if n > 0 || err == nil {
			return n, nil
		}
		in.sent = true
		if in.piped {
			in.once.Do(func() { close(in.eof) })
			return copy(p, pipedExit), nil
		}
	}
	<-in.done
	return 0, io.EOF
}

// firstOutput closes seen at the first byte written through it.
type firstOutput struct {
	w    io.Writer
	seen chan struct{}
	once sync.Once
}

func (f *firstOutput) Write(p []byte) (int, error) {
	if len(p) > 0 {
		f.once.Do(func() { close(f.seen) })
	}
	if f.w == nil {
		return len(p), nil
	}
	return f.w.Write(p)
}

// sizeQueue sends the terminal's size, first as it is, then after each
// SIGWINCH.
type sizeQueue struct {
	fd    int
	sigs  chan os.Signal
	sizes chan remotecommand.TerminalSize
	quit  chan struct{}
}

func newSizeQueue(fd int) *sizeQueue {
	q := &sizeQueue{fd: fd, sigs: make(chan os.Signal, 1), sizes: make(chan remotecommand.TerminalSize, 1), quit: make(chan struct{})}
	signal.Notify(q.sigs, syscall.SIGWINCH)
	go func() {
		defer close(q.sizes)
		for {
			if w, h, err := term.GetSize(fd); err == nil {
				select {
				case q.sizes <- remotecommand.TerminalSize{Width: uint16(w), Height: uint16(h)}:
				case <-q.quit:
					return
				}
			}
			select {
			case <-q.sigs:
			case <-q.quit:
				return
			}
		}
	}()
	return q
}

// Next implements remotecommand.TerminalSizeQueue.
func (q *sizeQueue) Next() *remotecommand.TerminalSize {
	s, ok := <-q.sizes
	if !ok {
		return nil
	}
	return &s
}

func (q *sizeQueue) stop() {
	signal.Stop(q.sigs)
	close(q.quit)
}
