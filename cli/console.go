package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
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

// ConsoleOptions are the options of the console command.
type ConsoleOptions struct {
	*Options
	Pool   string
	Worker int32

	// piped is true when stdin is not a terminal.
	piped bool
}

// NewConsoleCmd returns the console command.
func NewConsoleCmd(o *Options) *cobra.Command {
	c := &ConsoleOptions{Options: o}
	cmd := &cobra.Command{
		Use:   "console [--pool P] [--worker N]",
		Short: "Open a shell with a terminal in a worker pod",
		Long: `Opens the pool's shell in a worker pod with a terminal, as kubectl exec -it
does: the local terminal goes into raw mode and the window size follows it.

With a piped standard input, the input is forwarded once the shell has
printed its prompt; at its end the console sends "exit" and closes the
stream itself half a second later. On a
terminal, Ctrl-D goes to the remote shell.`,
		Example: `  kubectl shelljob console --pool shell --worker 2
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
	cmd.Flags().Int32Var(&c.Worker, "worker", 0, "the index of the worker in its pool")
	return cmd
}

// Complete tells a terminal from a pipe.
func (c *ConsoleOptions) Complete() { c.piped = !isTerminal(c.In) }

// Run runs the console until the remote shell ends, and ends with its
// exit code.
func (c *ConsoleOptions) Run(ctx context.Context) error {
	cl, err := c.Cluster()
	if err != nil {
		return err
	}
	pod, shell, err := c.findWorker(ctx, cl)
	if err != nil {
		return err
	}
	termName := os.Getenv("TERM")
	if termName == "" {
		termName = "xterm-256color"
	}
	command := []string{"env", "TERM=" + termName, shell, "-l"}
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
	return c.stream(ctx, cl.Exec, pod, command, opts)
}

// stream runs the exec with the console's stdin.
func (c *ConsoleOptions) stream(ctx context.Context, exec TerminalExec, pod types.NamespacedName, command []string, opts remotecommand.StreamOptions) error {
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
	err := exec(ctx, pod, command, opts)
	select {
	case <-closed:
		return nil // we closed it after the grace
	default:
	}
	var exit utilexec.ExitError
	if errors.As(err, &exit) {
		return exitCode(exit.ExitStatus())
	}
	return err
}

// consoleInput is the console's stdin. On a pipe, at EOF it sends
// pipedExit once and closes eof; on a terminal EOF belongs to the remote
// shell, so it sends nothing. Either way it then holds the stream open
// until done: an ended stdin would end the stream before the shell's last
// output came back.
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

// findWorker finds the pool's worker of the current revision with index
// c.Worker, and the pool's shell.
func (c *ConsoleOptions) findWorker(ctx context.Context, cl *Cluster) (types.NamespacedName, string, error) {
	pool, err := cl.Pools.Get(ctx, c.Pool, metav1.GetOptions{})
	if err != nil {
		return types.NamespacedName{}, "", err
	}
	shell := cmp.Or(pool.Spec.Shell, agentapi.DefaultShell)
	ns := cl.WorkerNamespace
	if ns == "" {
		ns = pool.Status.WorkerNamespace
	}
	if ns == "" {
		ns = cl.Namespace
	}
	pods, err := cl.Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{
		shellv1alpha1.LabelPool:   c.Pool,
		shellv1alpha1.LabelWorker: strconv.Itoa(int(c.Worker)),
	}).String()})
	if err != nil {
		return types.NamespacedName{}, "", fmt.Errorf("list worker pods: %w", err)
	}
	// The current revision first, then the newest.
	sort.Slice(pods.Items, func(a, b int) bool {
		ca := pods.Items[a].Labels[shellv1alpha1.LabelRevision] == pool.Status.Revision
		cb := pods.Items[b].Labels[shellv1alpha1.LabelRevision] == pool.Status.Revision
		if ca != cb {
			return ca
		}
		return pods.Items[b].CreationTimestamp.Before(&pods.Items[a].CreationTimestamp)
	})
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			return types.NamespacedName{Namespace: p.Namespace, Name: p.Name}, shell, nil
		}
	}
	return types.NamespacedName{}, "", fmt.Errorf("pool %s has no running worker %d in namespace %s", c.Pool, c.Worker, ns)
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
