package agentclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/streaming/pkg/httpstream"

	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/idle"
)

// stderrBytes is how much of the agent's stderr an error quotes; the
// agent writes one line.
const stderrBytes = 4 << 10

// Options configure a Client.
type Options struct {
	// Container is the worker container that runs the agent. Defaults to
	// none named, which the API server takes as the pod's only container.
	Container string
	// Warm makes Events run the agent's warm control channel rather than
	// its events stream alone: while a pod's channel is up, Start and
	// Signal to that pod go over it instead of an exec each. The operator,
	// which keeps an events stream per worker, sets it.
	Warm bool
	// ShareFollows makes Follow keep a warm channel to each pod it follows
	// on, opened at its first follow there and closed after two minutes
	// without one: the follows after the first go over it, without an exec
	// each. A reader that lives long and follows many jobs, such as the
	// bot, sets it.
	ShareFollows bool
	// StreamIdle bounds how long a Follow, PutFiles or GetFiles may move no
	// byte while it waits on the agent (a hung worker, a stalled
	// connection): it is then cut, and fails with an error that wraps
	// agentapi.ErrStreamIdle. The time the caller's writer or reader takes
	// does not count. A silent command's follow moves the agent's
	// keepalives; on an agent older than them it is cut and followed
	// again. Defaults to agentapi.DefaultStreamIdle; negative: no limit.
	StreamIdle time.Duration
}

// Client is agentapi.Client over pod exec.
type Client struct {
	config    *rest.Config
	rest      rest.Interface
	container string
	warm      bool
	share     bool
	idle      time.Duration
	// channelIdle cuts a control channel that got no message for that
	// long; a field so that tests can shorten it.
	channelIdle time.Duration
	// executor makes the exec's transport; a field so that tests can
	// replace it.
	executor func(u *url.URL) (remotecommand.Executor, error)

	mu       sync.Mutex
	channels map[types.NamespacedName]*channel
	opening  map[types.NamespacedName]bool
	// noControl holds the pods whose agent has no control channel.
	noControl map[types.NamespacedName]bool
}

var _ agentapi.Client = (*Client)(nil)

// New returns a Client that reaches the API server of config.
func New(config *rest.Config, opts Options) (*Client, error) {
	core, err := corev1client.NewForConfig(config)
	if err != nil {
		return nil, fmt.Errorf("agent client: %w", err)
	}
	c := &Client{
		config: rest.CopyConfig(config), rest: core.RESTClient(), container: opts.Container,
		warm: opts.Warm, share: opts.ShareFollows, idle: opts.StreamIdle, channelIdle: channelIdle,
		channels: map[types.NamespacedName]*channel{}, opening: map[types.NamespacedName]bool{},
		noControl: map[types.NamespacedName]bool{},
	}
	if c.idle == 0 {
		c.idle = agentapi.DefaultStreamIdle
	}
	c.executor = c.newExecutor
	return c, nil
}

// watch bounds a stream by the idle limit.
func (c *Client) watch(ctx context.Context) (context.Context, *idle.Watch) {
	return idle.New(ctx, c.idle, idleError(c.idle))
}

// eventsWatch bounds a pod's event stream, over a control channel or its
// own exec, by the channels' idle limit: the agent's keepalives move it.
func (c *Client) eventsWatch(ctx context.Context) (context.Context, *idle.Watch) {
	return idle.New(ctx, c.channelIdle, idleError(c.channelIdle))
}

// idleError is the cause of a stream cut after limit without a byte.
func idleError(limit time.Duration) error {
	return fmt.Errorf("no byte moved for %s: %w", limit, agentapi.ErrStreamIdle)
}

// newExecutor is NewExecutor on the client's config.
func (c *Client) newExecutor(u *url.URL) (remotecommand.Executor, error) {
	return NewExecutor(c.config, u)
}

// NewExecutor returns the transport of the exec request u: WebSocket
// first, SPDY when the upgrade fails, as kubectl exec does.
func NewExecutor(config *rest.Config, u *url.URL) (remotecommand.Executor, error) {
	spdy, err := remotecommand.NewSPDYExecutor(config, "POST", u)
	if err != nil {
		return nil, err
	}
	// WebSocket needs GET (RFC 6455 4.1).
	ws, err := remotecommand.NewWebSocketExecutor(config, "GET", u.String())
	if err != nil {
		return nil, err
	}
	return remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
}

// argv is the agent's command line for subcommand sub.
func argv(sub string, args ...string) []string {
	out := []string{agentapi.AgentPath, sub, agentapi.FlagProtocol + "=" + strconv.Itoa(agentapi.ProtocolVersion)}
	return append(out, args...)
}

func flag(name, value string) string { return name + "=" + value }

// execURL is the exec request for command in pod.
func (c *Client) execURL(pod types.NamespacedName, command []string, stdin bool) *url.URL {
	return c.podExecURL(pod, &corev1.PodExecOptions{Command: command, Stdin: stdin, Stdout: true, Stderr: true})
}

// podExecURL is the exec request of opts in pod, in the agent's
// container.
func (c *Client) podExecURL(pod types.NamespacedName, opts *corev1.PodExecOptions) *url.URL {
	opts.Container = c.container
	return c.rest.Post().
		Namespace(pod.Namespace).
		Resource("pods").
		Name(pod.Name).
		SubResource("exec").
		VersionedParams(opts, scheme.ParameterCodec).
		URL()
}

// exec runs the agent with command in pod, stdin feeding it (nil for
// none) and stdout taking its answer.
func (c *Client) exec(ctx context.Context, pod types.NamespacedName, command []string, stdin io.Reader, stdout io.Writer) error {
	ex, err := c.executor(c.execURL(pod, command, stdin != nil))
	if err != nil {
		return fmt.Errorf("agent %s in pod %s: %w", command[1], pod, err)
	}
	stderr := &capped{max: stderrBytes}
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr})
	return execError(ctx, pod, command[1], err, stderr.String())
}

// execError names the pod and the subcommand, and turns the agent's exit
// code into agentapi's errors.
func execError(ctx context.Context, pod types.NamespacedName, sub string, err error, stderr string) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("agent %s in pod %s: %w", sub, pod, context.Cause(ctx))
	}
	msg := strings.TrimSpace(stderr)
	if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
		msg = msg[i+1:]
	}
	var exit utilexec.ExitError
	if errors.As(err, &exit) {
		if msg == "" {
			msg = err.Error()
		}
		if known := agentapi.ExitError(exit.ExitStatus()); known != nil {
			return fmt.Errorf("agent %s in pod %s: %s: %w", sub, pod, msg, known)
		}
		return fmt.Errorf("agent %s in pod %s: exit %d: %s", sub, pod, exit.ExitStatus(), msg)
	}
	if msg != "" {
		return fmt.Errorf("agent %s in pod %s: %w (%s)", sub, pod, err, msg)
	}
	return fmt.Errorf("agent %s in pod %s: %w", sub, pod, err)
}

// capped keeps the first max bytes written to it.
type capped struct {
	b   bytes.Buffer
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.b.Len(); room > 0 {
		c.b.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (c *capped) String() string { return c.b.String() }

// Start implements agentapi.Client.
func (c *Client) Start(ctx context.Context, pod types.NamespacedName, req agentapi.StartRequest) (agentapi.StartResponse, error) {
	var resp agentapi.StartResponse
	if m, ok, err := c.viaChannel(ctx, pod, agentapi.ControlRequest{Op: agentapi.CmdStart, Job: req.Job, Start: &req}); ok {
		return answered(pod, agentapi.CmdStart, m, err, func(m agentapi.ControlMessage) *agentapi.StartResponse { return m.Start })
	}
	body, err := json.Marshal(req)
	if err != nil {
		return resp, err
	}
	var out bytes.Buffer
	if err := c.exec(ctx, pod, argv(agentapi.CmdStart), bytes.NewReader(body), &out); err != nil {
		return resp, err
	}
	if err := json.Unmarshal(out.Bytes(), &resp); err != nil {
		return resp, fmt.Errorf("agent start in pod %s: answer %q: %w", pod, out.Bytes(), err)
	}
	return resp, nil
}

// Signal implements agentapi.Client.
func (c *Client) Signal(ctx context.Context, pod types.NamespacedName, job string, sig agentapi.Signal) (agentapi.SignalResponse, error) {
	var resp agentapi.SignalResponse
	if m, ok, err := c.viaChannel(ctx, pod, agentapi.ControlRequest{Op: agentapi.CmdSignal, Job: job, Signal: sig}); ok {
		return answered(pod, agentapi.CmdSignal, m, err, func(m agentapi.ControlMessage) *agentapi.SignalResponse { return m.Signal })
	}
	var out bytes.Buffer
	cmd := argv(agentapi.CmdSignal, flag(agentapi.FlagJob, job), flag(agentapi.FlagSignal, string(sig)))
	if err := c.exec(ctx, pod, cmd, nil, &out); err != nil {
		return resp, err
	}
	if err := json.Unmarshal(out.Bytes(), &resp); err != nil {
		return resp, fmt.Errorf("agent signal in pod %s: answer %q: %w", pod, out.Bytes(), err)
	}
	return resp, nil
}

// Delivered implements agentapi.Client.
func (c *Client) Delivered(ctx context.Context, pod types.NamespacedName, job string) error {
	return c.do(ctx, pod, agentapi.ControlRequest{Op: agentapi.CmdDelivered, Job: job}, flag(agentapi.FlagJob, job))
}

// Hangup implements agentapi.Client.
func (c *Client) Hangup(ctx context.Context, pod types.NamespacedName, job, session string) error {
	args := []string{flag(agentapi.FlagJob, job)}
	if session != "" {
		args = append(args, flag(agentapi.FlagSession, session))
	}
	return c.do(ctx, pod, agentapi.ControlRequest{Op: agentapi.CmdHangup, Job: job, Session: session}, args...)
}

// do makes req, whose answer is empty, over the pod's channel, or through
// an exec of its subcommand with args.
func (c *Client) do(ctx context.Context, pod types.NamespacedName, req agentapi.ControlRequest, args ...string) error {
	if m, ok, err := c.viaChannel(ctx, pod, req); ok {
		if err != nil && m.Code == 1 && strings.HasPrefix(m.Error, "unknown control operation") {
			// An agent older than the delivered operation, which answered
			// any it did not know so; its exec would not know the
			// subcommand either.
			return fmt.Errorf("%w: %w", err, agentapi.ErrUsage)
		}
		return err
	}
	return c.exec(ctx, pod, argv(req.Op, args...), nil, io.Discard)
}

// stream execs a long-lived subcommand whose stdout read consumes. Its
// stdin stays open until the stream ends, so that the agent's subcommand,
// run with --watch-stdin, ends with the exec. watch, unless nil, sees the
// bytes of stdout, and the time read takes them does not count.
func (c *Client) stream(ctx context.Context, pod types.NamespacedName, command []string, watch *idle.Watch, read func(io.Reader) error) (streamErr, readErr error) {
	stdinR, stdinW := io.Pipe()
	defer stdinW.Close()
	return c.streamIn(ctx, pod, command, stdinR, watch, read)
}

// streamIn is stream with the caller's stdin.
func (c *Client) streamIn(ctx context.Context, pod types.NamespacedName, command []string, stdin io.Reader, watch *idle.Watch, read func(io.Reader) error) (streamErr, readErr error) {
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := read(outR)
		// A reader that stops early makes the exec's writes fail, so that
		// the exec ends too.
		outR.CloseWithError(errors.Join(err, errReaderDone))
		done <- err
	}()
	streamErr = c.exec(ctx, pod, command, stdin, watch.Writer(outW))
	outW.CloseWithError(io.EOF)
	return streamErr, <-done
}

var errReaderDone = errors.New("reader done")

// Events implements agentapi.Client. It always returns an error: ctx's, or
// why the stream ended. With Options.Warm it runs the pod's control
// channel, or the events stream alone when the agent has none.
func (c *Client) Events(ctx context.Context, pod types.NamespacedName, handle func(agentapi.Event)) error {
	if c.warm {
		if err := c.control(ctx, pod, handle); !errors.Is(err, errNoControl) {
			return err
		}
	}
	cmd := argv(agentapi.CmdEvents, agentapi.FlagWatchStdin)
	ctx, watch := c.eventsWatch(ctx)
	defer watch.Stop()
	streamErr, readErr := c.stream(ctx, pod, cmd, watch, func(r io.Reader) error { return agentapi.DecodeEvents(r, handle) })
	if streamErr != nil {
		return streamErr
	}
	if readErr != nil && !errors.Is(readErr, io.EOF) {
		return fmt.Errorf("agent events in pod %s: %w", pod, readErr)
	}
	return fmt.Errorf("agent events in pod %s: stream ended: %w", pod, io.ErrUnexpectedEOF)
}

// Follow implements agentapi.Client.
func (c *Client) Follow(ctx context.Context, pod types.NamespacedName, job string, offset int64, w io.Writer) (int64, error) {
	if ch := c.channel(pod); ch != nil {
		if reached, ok, err := ch.follow(ctx, job, offset, w); ok {
			return reached, err
		}
	}
	if c.share {
		c.shareFollows(pod)
	}
	return c.followExec(ctx, pod, job, offset, w)
}

// followExec follows job in its own exec.
func (c *Client) followExec(ctx context.Context, pod types.NamespacedName, job string, offset int64, w io.Writer) (int64, error) {
	cmd := argv(agentapi.CmdFollow, flag(agentapi.FlagJob, job),
		flag(agentapi.FlagOffset, strconv.FormatInt(offset, 10)), agentapi.FlagFramed, agentapi.FlagWatchStdin)
	// Until the e frame, ctx ends the exec. After it the output is whole:
	// Follow returns at once, and the exec is left to end by itself, under
	// the idle limit alone. Waiting for it would cost the agent's exit as
	// the runtime and the kubelet report it, a good part of a round trip,
	// and a caller gone by then would only cut a stream that ends anyway.
	detached, cancel := context.WithCancel(context.WithoutCancel(ctx))
	detach := context.AfterFunc(ctx, cancel)
	execCtx, watch := c.watch(detached)
	stdinR, stdinW := io.Pipe()
	reached := offset
	endFrame := make(chan struct{})
	type result struct{ streamErr, readErr error }
	done := make(chan result, 1)
	go func() {
		defer cancel()
		defer detach()
		defer watch.Stop()
		defer stdinW.Close()
		streamErr, readErr := c.streamIn(execCtx, pod, cmd, stdinR, watch, func(r io.Reader) error {
			n, err := agentapi.ReadFollow(r, offset, w)
			reached = n
			if err == nil {
				detach()
				close(endFrame)
			}
			return err
		})
		done <- result{streamErr, readErr}
	}()
	var r result
	select {
	case <-endFrame:
		return reached, nil
	case r = <-done:
	}
	switch {
	case r.readErr == nil:
		return reached, nil // the e frame came: the job ended
	case r.streamErr != nil:
		return reached, r.streamErr
	}
	return reached, fmt.Errorf("agent follow of %s in pod %s: %w", job, pod, r.readErr)
}

// FollowText implements agentapi.Client. An agent older than
// agentapi.FlagText has its follow made into the text here.
func (c *Client) FollowText(ctx context.Context, pod types.NamespacedName, job string, mode agentapi.TextMode, w io.Writer) error {
	if ch := c.channel(pod); ch != nil {
		if ok, err := ch.followText(ctx, job, mode, w); ok {
			return err
		}
	}
	if c.share {
		c.shareFollows(pod)
	}
	cw := &countingWriter{w: w}
	cmd := argv(agentapi.CmdFollow, flag(agentapi.FlagJob, job), flag(agentapi.FlagText, string(mode)), agentapi.FlagWatchStdin)
	ctx, watch := c.watch(ctx)
	defer watch.Stop()
	streamErr, readErr := c.stream(ctx, pod, cmd, watch, func(r io.Reader) error { return agentapi.ReadText(r, mode, cw) })
	switch {
	case readErr == nil:
		return nil
	case errors.Is(streamErr, agentapi.ErrUsage) && cw.n == 0:
		return agentapi.TextOfFollow(func(w io.Writer) error {
			_, err := c.Follow(ctx, pod, job, 0, w)
			return err
		}, mode, w)
	case streamErr != nil:
		return streamErr
	}
	return fmt.Errorf("agent follow of %s in pod %s: %w", job, pod, readErr)
}

// Attach attaches a terminal to the console of Console job on pod: it runs
// the agent's attach subcommand with a TTY, whose stdin, stdout and size
// are those of opts (Stdin, Stdout and TerminalSizeQueue; it sets Tty,
// and a terminal has no stderr of its own). It returns once the console
// has ended, with the exec's error: a utilexec.ExitError carries a
// non-zero exit status of the console's command, or that of the attach
// itself when it was refused (agentapi.ExitAttached, an unknown job),
// whose message went to Stdout, the terminal's one stream. The exec's end
// hangs the console up.
func (c *Client) Attach(ctx context.Context, pod types.NamespacedName, job string, opts remotecommand.StreamOptions) error {
	u := c.podExecURL(pod, &corev1.PodExecOptions{
		Command: argv(agentapi.CmdAttach, flag(agentapi.FlagJob, job)),
		Stdin:   opts.Stdin != nil,
		Stdout:  opts.Stdout != nil,
		TTY:     true,
	})
	ex, err := c.executor(u)
	if err != nil {
		return fmt.Errorf("agent attach in pod %s: %w", pod, err)
	}
	opts.Tty, opts.Stderr = true, nil
	if err := ex.StreamWithContext(ctx, opts); err != nil {
		return fmt.Errorf("agent attach of %s in pod %s: %w", job, pod, err)
	}
	return nil
}

// PutFiles implements agentapi.Client.
func (c *Client) PutFiles(ctx context.Context, pod types.NamespacedName, job string, tar io.Reader) error {
	ctx, watch := c.watch(ctx)
	defer watch.Stop()
	return c.exec(ctx, pod, argv(agentapi.CmdPutFiles, flag(agentapi.FlagJob, job)), watch.Reader(tar), io.Discard)
}

// GetFiles implements agentapi.Client. An offset of 0 is not passed on:
// an agent older than offsets takes the call.
func (c *Client) GetFiles(ctx context.Context, pod types.NamespacedName, job string, offset int64, w io.Writer) error {
	ctx, watch := c.watch(ctx)
	defer watch.Stop()
	cmd := argv(agentapi.CmdGetFiles, flag(agentapi.FlagJob, job))
	if offset != 0 {
		cmd = append(cmd, flag(agentapi.FlagOffset, strconv.FormatInt(offset, 10)))
	}
	return c.exec(ctx, pod, cmd, nil, watch.Writer(w))
}
