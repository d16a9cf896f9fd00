package streamclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/utils/clock"

	streamv1alpha1 "shelljob.dev/shelljob/api/stream/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/agentclient"
	"shelljob.dev/shelljob/internal/idle"
)

// Waits before a follow is resumed: they double while the streams read
// nothing, so that an API that does not answer is not asked once a
// second.
const (
	DefaultRetry    = time.Second
	DefaultRetryMax = 30 * time.Second
)

// ErrOutputLost is wrapped by an error for a job whose output or files
// are lost: its worker is gone (410 Gone). No retry mends it.
var ErrOutputLost = errors.New("the job's output is lost")

// Options configure a Client.
type Options struct {
	// Namespace holds the jobs. Required.
	Namespace string
	// Own reaches the jobs through myshelljobs, which serves the caller's
	// own jobs alone, with the rights a user who runs jobs has (get on
	// myshelljobs/log); else through shelljobs, which serves any job of
	// the namespace to whoever has get on shelljobs/log.
	Own bool
	// StreamIdle bounds how long a stream may move no byte, keepalives
	// included: a follow is then resumed, any other call fails with an
	// error that wraps agentapi.ErrStreamIdle. The time the caller's
	// writer or reader takes does not count. Defaults to
	// agentapi.DefaultStreamIdle; negative: no limit.
	StreamIdle time.Duration
	// Retry is the first wait before a follow is resumed, RetryMax the
	// longest. Default to DefaultRetry and DefaultRetryMax.
	Retry, RetryMax time.Duration
	// Deliver, with Own, asks the server to mark each job delivered whose
	// output a follow reads to its end into an agentapi.ExitSink, when the
	// job's exit counts no files (ShellJobLogOptions.Deliver): the
	// caller then writes no mark of its own.
	Deliver bool
	// OnResume, when set, hears why each follow is resumed, from where.
	OnResume func(job string, offset int64, err error)
	// Clock times the waits before a resume. Defaults to the real clock.
	Clock clock.Clock
}

// Client reaches the stream API of a namespace.
type Client struct {
	config *rest.Config
	rest   rest.Interface
	opts   Options
}

// params encodes the options into a request's query.
var params = func() runtime.ParameterCodec {
	s := runtime.NewScheme()
	if err := streamv1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return runtime.NewParameterCodec(s)
}()

// New returns a Client that reaches the API server of config. Its
// timeout, if any, is dropped: a stream lasts as long as its context.
func New(config *rest.Config, opts Options) (*Client, error) {
	if opts.Namespace == "" {
		return nil, errors.New("stream client: Options.Namespace is required")
	}
	if opts.StreamIdle == 0 {
		opts.StreamIdle = agentapi.DefaultStreamIdle
	}
	if opts.Retry <= 0 {
		opts.Retry = DefaultRetry
	}
	if opts.RetryMax < opts.Retry {
		opts.RetryMax = max(DefaultRetryMax, opts.Retry)
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	cfg := rest.CopyConfig(config)
	cfg.Timeout = 0
	cfg.APIPath = "/apis"
	cfg.GroupVersion = &streamv1alpha1.GroupVersion
	cfg.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("stream client: %w", err)
	}
	return &Client{config: cfg, rest: rc, opts: opts}, nil
}

// Delivers tells whether the server marks the jobs delivered that a
// follow reads to their end, as Options.Deliver asks.
func (c *Client) Delivers() bool { return c.opts.Own && c.opts.Deliver }

// As is a Client of the same API and options acting as imp, through
// myshelljobs: the client of a program that reads each job as the person
// it runs the job for, whom its own credentials may impersonate.
func (c *Client) As(imp rest.ImpersonationConfig) (*Client, error) {
	cfg := rest.CopyConfig(c.config)
	cfg.Impersonate = imp
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("stream client as %s: %w", imp.UserName, err)
	}
	opts := c.opts
	opts.Own = true
	return &Client{config: cfg, rest: rc, opts: opts}, nil
}

// request is a request for the subresource sub of job.
func (c *Client) request(verb, job, sub string) *rest.Request {
	resource := streamv1alpha1.Resource
	if c.opts.Own {
		resource = streamv1alpha1.OwnResource
	}
	return c.rest.Verb(verb).Namespace(c.opts.Namespace).Resource(resource).Name(job).SubResource(sub)
}

// watch bounds a stream by the idle limit.
func (c *Client) watch(ctx context.Context) (context.Context, *idle.Watch) {
	return idle.New(ctx, c.opts.StreamIdle, fmt.Errorf("no byte moved for %s: %w", c.opts.StreamIdle, agentapi.ErrStreamIdle))
}

// Follow copies the output of job from byte offset to w until the output
// is closed (the job ended), and returns the offset reached, as
// agentapi.Client.Follow does: a w that is an agentapi.FollowSink gets
// the frames, and one that is an agentapi.ExitSink the job's exit, when
// the server and the worker's agent tell it. With offset
// agentapi.AwaitStart, it waits for the job's start and follows it from
// 0, so that it may be called right after the job's create; a job not
// started yet is waited for anyway. A stream cut is resumed from the
// offset it reached, after a wait, until ctx ends: it returns the error
// of a refusal, or of a job whose output is lost (ErrOutputLost), at
// once.
func (c *Client) Follow(ctx context.Context, job string, offset int64, w io.Writer) (int64, error) {
	wait := c.opts.Retry
	for {
		reached, err := c.followOnce(ctx, job, offset, w)
		if reached > max(offset, 0) {
			offset, wait = reached, c.opts.Retry
		}
		if err == nil || ctx.Err() != nil || final(err) {
			return max(offset, reached), c.named(job, err)
		}
		if err := c.again(ctx, job, max(offset, 0), err, &wait); err != nil {
			return max(offset, reached), err
		}
	}
}

// again waits before a call is tried again after err, from offset, and
// doubles the next wait; it fails when ctx ends first.
func (c *Client) again(ctx context.Context, job string, offset int64, err error, wait *time.Duration) error {
	if c.opts.OnResume != nil {
		c.opts.OnResume(job, offset, err)
	}
	t := c.opts.Clock.NewTimer(*wait)
	defer t.Stop()
	select {
	case <-t.C():
	case <-ctx.Done():
		return ctx.Err()
	}
	*wait = min(2**wait, c.opts.RetryMax)
	return nil
}

// followOnce is one stream of a follow.
func (c *Client) followOnce(ctx context.Context, job string, offset int64, w io.Writer) (int64, error) {
	_, exit := w.(agentapi.ExitSink)
	opts := &streamv1alpha1.ShellJobLogOptions{Follow: true, Framed: true, Offset: max(offset, 0), AwaitStart: offset == agentapi.AwaitStart, Exit: exit,
		Deliver: exit && c.Delivers()}
	ctx, watch := c.watch(ctx)
	defer watch.Stop()
	body, err := c.request(http.MethodGet, job, streamv1alpha1.SubresourceLog).VersionedParams(opts, params).Stream(ctx)
	if err != nil {
		return offset, cause(ctx, err)
	}
	defer body.Close()
	reached, err := agentapi.DecodeFollow(watch.Source(body), max(offset, 0), agentapi.NearSink(watch, agentapi.SinkOf(w)), nil)
	return reached, cause(ctx, err)
}

// FollowText writes to w the job's output from its start as its final
// shows it, in mode, made on the worker (agentapi.Client.FollowText),
// once the output is closed. A request that fails before its stream
// starts is tried again; a stream cut after fails: read it again from the
// start.
func (c *Client) FollowText(ctx context.Context, job string, mode agentapi.TextMode, w io.Writer) error {
	wait := c.opts.Retry
	for {
		started, err := c.textOnce(ctx, job, mode, w)
		if err == nil || ctx.Err() != nil || final(err) || started {
			return c.named(job, err)
		}
		if err := c.again(ctx, job, 0, err, &wait); err != nil {
			return err
		}
	}
}

// textOnce is one request of FollowText; started tells whether its
// stream started.
func (c *Client) textOnce(ctx context.Context, job string, mode agentapi.TextMode, w io.Writer) (started bool, err error) {
	opts := &streamv1alpha1.ShellJobLogOptions{Framed: true, Text: streamv1alpha1.TextMode(mode)}
	ctx, watch := c.watch(ctx)
	defer watch.Stop()
	body, err := c.request(http.MethodGet, job, streamv1alpha1.SubresourceLog).VersionedParams(opts, params).Stream(ctx)
	if err != nil {
		return false, cause(ctx, err)
	}
	defer body.Close()
	return true, cause(ctx, agentapi.ReadText(watch.Source(body), mode, watch.Writer(w)))
}

// FilesTries is how many requests in a row that moved no byte a GetFiles
// makes before it gives up.
const FilesTries = 5

// GetFiles writes the job's $SHELLJOB_OUT, once it started, as a tar
// stream to w. A stream cut (the API server's request timeout, which a
// files request is subject to, a restart of the replica that served it, a
// broken connection) is read on from the offset it reached, after a wait
// as a follow's: the tar stream of a job that has ended is the same at
// every read, so nothing is lost or twice; the files of a job still
// running are not resumed. It gives up once FilesTries requests in a row
// moved no byte, or at once when one that moved none was cut idle (a
// worker that stops answering), refused, or when w fails.
func (c *Client) GetFiles(ctx context.Context, job string, w io.Writer) error {
	var offset int64
	wait, fruitless := c.opts.Retry, 0
	for {
		reached, err := c.filesOnce(ctx, job, offset, w)
		moved := reached > offset
		offset = reached
		var werr writeError
		switch {
		case err == nil || ctx.Err() != nil || final(err) || errors.As(err, &werr):
			return c.named(job, err)
		case moved:
			fruitless, wait = 0, c.opts.Retry
		case errors.Is(err, agentapi.ErrStreamIdle):
			return c.named(job, err)
		default:
			if fruitless++; fruitless >= FilesTries {
				return c.named(job, err)
			}
		}
		if err := c.again(ctx, job, offset, err, &wait); err != nil {
			return c.named(job, err)
		}
	}
}

// filesOnce is one request of GetFiles, from offset: it returns the
// offset it reached.
func (c *Client) filesOnce(ctx context.Context, job string, offset int64, w io.Writer) (int64, error) {
	ctx, watch := c.watch(ctx)
	defer watch.Stop()
	opts := &streamv1alpha1.ShellJobFilesOptions{Offset: offset}
	body, err := c.request(http.MethodGet, job, streamv1alpha1.SubresourceFiles).VersionedParams(opts, params).Stream(ctx)
	if err != nil {
		return offset, cause(ctx, err)
	}
	defer body.Close()
	n, err := io.Copy(watch.Writer(writerOf{w}), watch.Source(body))
	return offset + n, cause(ctx, err)
}

// writerOf marks the errors of the caller's writer, which no request
// mends.
type writerOf struct{ w io.Writer }

func (w writerOf) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	if err != nil {
		err = writeError{err}
	}
	return n, err
}

// writeError is an error of the caller's writer.
type writeError struct{ err error }

func (e writeError) Error() string { return e.err.Error() }
func (e writeError) Unwrap() error { return e.err }

// PutFiles unpacks the tar stream into the $SHELLJOB_OUT of the job, held
// (spec.hold) and not started, waiting for its placement: the command's
// input files.
func (c *Client) PutFiles(ctx context.Context, job string, tar io.Reader) error {
	ctx, watch := c.watch(ctx)
	defer watch.Stop()
	err := c.request(http.MethodPut, job, streamv1alpha1.SubresourceFiles).
		SetHeader("Content-Type", "application/x-tar").Body(io.NopCloser(watch.Reader(tar))).Do(ctx).Error()
	return c.named(job, cause(ctx, err))
}

// Attach attaches streams to the console of job, once it runs, as
// `kubectl attach` does: over WebSocket, falling back to SPDY where an
// upgrade to WebSocket fails. With streams.Tty, stderr comes on stdout.
// It returns once the console ended, with an error that carries the
// shell's exit status (client-go's exec.CodeExitError) when it is not 0.
func (c *Client) Attach(ctx context.Context, job string, streams remotecommand.StreamOptions) error {
	opts := &streamv1alpha1.ShellJobAttachOptions{
		Stdin:  streams.Stdin != nil,
		Stdout: streams.Stdout != nil,
		Stderr: streams.Stderr != nil && !streams.Tty,
		TTY:    streams.Tty,
	}
	if !opts.Stderr {
		streams.Stderr = nil
	}
	u := c.request(http.MethodPost, job, streamv1alpha1.SubresourceAttach).VersionedParams(opts, params).URL()
	ex, err := agentclient.NewExecutor(c.config, u)
	if err != nil {
		return fmt.Errorf("attach to shelljob %s: %w", job, err)
	}
	return c.named(job, ex.StreamWithContext(ctx, streams))
}

// final tells whether err is a refusal that no retry mends.
func final(err error) bool {
	switch {
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err), apierrors.IsNotFound(err),
		apierrors.IsBadRequest(err), apierrors.IsConflict(err), apierrors.IsMethodNotSupported(err),
		isGone(err):
		return true
	}
	return false
}

// isGone tells whether err is the 410 Gone of a lost output.
func isGone(err error) bool {
	var status apierrors.APIStatus
	return errors.As(err, &status) && status.Status().Code == http.StatusGone
}

// named names the job in err, and marks a lost output's.
func (c *Client) named(job string, err error) error {
	switch {
	case err == nil:
		return nil
	case isGone(err):
		return fmt.Errorf("shelljob %s/%s: %w: %w", c.opts.Namespace, job, ErrOutputLost, err)
	}
	return fmt.Errorf("shelljob %s/%s: %w", c.opts.Namespace, job, err)
}

// cause is err, or why ctx ended if it did: the idle limit's cut.
func cause(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) {
			return c
		}
	}
	return err
}
