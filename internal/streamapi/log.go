package streamapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	streamv1alpha1 "shelljob.dev/shelljob/api/stream/v1alpha1"
	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/shelljob"
)

// Content types of a log.
const (
	contentTypeText   = "text/plain"
	contentTypeFramed = "application/octet-stream"
)

// Retries of a follow whose stream to the agent broke, inside one
// request: the reader's stream stays open while the follow goes on from
// the offset it reached. A follow that moves nothing in that many tries
// fails.
const (
	followRetry     = time.Second
	followRetryMax  = 8 * time.Second
	followRetryMost = 5
)

// LogREST serves shelljobs/log: the job's output, from its worker's agent.
type LogREST struct {
	streams
}

var _ rest.Connecter = (*LogREST)(nil)

// New implements rest.Storage.
func (r *LogREST) New() runtime.Object { return &shellv1alpha1.ShellJob{} }

// Destroy implements rest.Storage.
func (r *LogREST) Destroy() {}

// ConnectMethods implements rest.Connecter.
func (r *LogREST) ConnectMethods() []string { return []string{http.MethodGet} }

// NewConnectOptions implements rest.Connecter.
func (r *LogREST) NewConnectOptions() (runtime.Object, bool, string) {
	return &streamv1alpha1.ShellJobLogOptions{}, false, ""
}

// Connect implements rest.Connecter.
func (r *LogREST) Connect(ctx context.Context, name string, obj runtime.Object, responder rest.Responder) (http.Handler, error) {
	opts, ok := obj.(*streamv1alpha1.ShellJobLogOptions)
	if !ok {
		return nil, apierrors.NewInternalError(fmt.Errorf("log options of type %T", obj))
	}
	if err := validateLog(opts); err != nil {
		return nil, err
	}
	if info, ok := request.RequestInfoFrom(ctx); opts.Deliver && (!ok || info.Resource != streamv1alpha1.OwnResource) {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("deliver marks the caller's own job: ask it through %s", streamv1alpha1.OwnResource))
	}
	key, err := r.key(ctx, name)
	if err != nil {
		return nil, err
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		ctx, cancel := r.requestContext(req)
		defer cancel()
		ctype := contentTypeText
		if opts.Framed {
			ctype = contentTypeFramed
		}
		resp := newResponse(w, req, ctype)
		out := &logOut{resp: resp, exit: opts.Exit}
		if opts.Framed {
			out.frames = agentapi.NewFrameWriter(resp)
			if opts.Text != "" {
				out.frames = agentapi.NewTextFrameWriter(resp)
			}
			// Stopped before the handler returns, even as it aborts.
			defer resp.keepAlive(out.frames, r.keepalive)()
		}
		resp.finish(r.ended(req, r.log(ctx, key, opts, out)), responder)
	}), nil
}

// validateLog checks the options that need no job.
func validateLog(o *streamv1alpha1.ShellJobLogOptions) error {
	switch {
	case o.Offset < 0:
		return apierrors.NewBadRequest(fmt.Sprintf("offset %d: an offset counts bytes from 0", o.Offset))
	case o.AwaitStart && o.Offset != 0:
		return apierrors.NewBadRequest("awaitStart follows the output from its start: offset must be 0")
	case o.Text != "" && !agentapi.TextMode(o.Text).Valid():
		return apierrors.NewBadRequest(fmt.Sprintf("text %q: it is %q or %q", o.Text, streamv1alpha1.TextEscaped, streamv1alpha1.TextRendered))
	case o.Text != "" && o.Offset != 0:
		return apierrors.NewBadRequest("text gives the output from its start: offset must be 0")
	case o.Exit && (!o.Framed || o.Text != ""):
		return apierrors.NewBadRequest("exit comes in a frame of the framed output: it needs framed, and no text")
	case o.Deliver && !o.Exit:
		return apierrors.NewBadRequest("deliver marks a job whose exit frame counts no files: it needs exit")
	}
	return nil
}

// streams is what each subresource needs: the jobs, their agents, and the
// server's end.
type streams struct {
	jobs  *jobs
	agent agentapi.Client
	// stopping ends when the server stops: its streams are cut, and their
	// readers go on with another replica.
	stopping context.Context
	// keepalive is how often a quiet framed stream gets a keepalive.
	keepalive time.Duration
	// owners is myshelljobs' owner rule.
	owners ownerRule
}

// key is the job name in the request's namespace, once the owner rule
// allows the request.
func (s *streams) key(ctx context.Context, name string) (types.NamespacedName, error) {
	ns, ok := request.NamespaceFrom(ctx)
	if !ok || ns == "" {
		return types.NamespacedName{}, apierrors.NewBadRequest("a shelljob's subresource needs its namespace")
	}
	key := types.NamespacedName{Namespace: ns, Name: name}
	return key, s.owners.check(ctx, key)
}

// requestContext is the request's context, cut when the server stops.
func (s *streams) requestContext(req *http.Request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(req.Context())
	stop := context.AfterFunc(s.stopping, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// ended is err as the caller hears it: a request cut because the server
// stops is to be tried again, on another replica.
func (s *streams) ended(req *http.Request, err error) error {
	if err != nil && s.stopping.Err() != nil && req.Context().Err() == nil {
		return apierrors.NewServiceUnavailable("the server is stopping: try again")
	}
	return err
}

// log writes the job's output to out as opts ask, and returns how it
// ended.
func (r *LogREST) log(ctx context.Context, key types.NamespacedName, opts *streamv1alpha1.ShellJobLogOptions, out *logOut) error {
	follow := opts.Follow || opts.AwaitStart || opts.Text != ""
	offset := opts.Offset
	out.offset = offset
	tries := 0
	for {
		sj, err := r.jobs.wait(ctx, key, func(sj *shellv1alpha1.ShellJob) (bool, error) {
			switch {
			case shelljob.IsStarted(sj) || shelljob.IsFinished(sj):
				return true, nil
			case !follow:
				return false, apierrors.NewBadRequest(fmt.Sprintf("shelljob %s has not started: it has no output yet; follow it (follow=true) to wait for it", sj.Name))
			}
			// A follow opens on the job's worker at once, and the agent
			// holds it until the command starts; a text waits for the
			// start here.
			return opts.Text == "" && shelljob.IsAssigned(sj), nil
		})
		if err != nil {
			return err
		}
		// A follow that already moved has seen the start, which the
		// job's status may not say yet.
		started := shelljob.IsStarted(sj) || offset > opts.Offset
		if !started && offset > 0 {
			return apierrors.NewBadRequest(fmt.Sprintf("offset %d: shelljob %s has not started, and has no output yet", offset, sj.Name))
		}
		if !started && shelljob.IsFinished(sj) {
			// It never ran: its output is empty and closed.
			return out.end(offset)
		}
		switch {
		case !follow && !shelljob.IsFinished(sj):
			// The agent's follow has no end short of the output's close.
			return apierrors.NewBadRequest(fmt.Sprintf("shelljob %s is running: follow its output (follow=true) to read it as it comes; without follow, a job's log is read once it ended", sj.Name))
		case shelljob.IsFinished(sj) && offset > sj.Status.OutputBytes:
			return apierrors.NewBadRequest(fmt.Sprintf("offset %d is past the end of shelljob %s's output, %d bytes", offset, sj.Name, sj.Status.OutputBytes))
		case shelljob.IsFinished(sj) && offset == sj.Status.OutputBytes && opts.Text == "":
			return out.end(offset)
		}
		pod, err := r.jobs.worker(ctx, sj)
		if err != nil {
			return err
		}
		fctx, cancel := context.WithCancel(ctx)
		from := offset
		if !started {
			// The agent holds the follow until the command starts; the
			// job may yet go to another worker, or end without running.
			from = agentapi.AwaitStart
			r.jobs.onChange(fctx, key, func(now *shellv1alpha1.ShellJob) {
				if now.Status.Pod != sj.Status.Pod || (shelljob.IsFinished(now) && !shelljob.IsStarted(now)) {
					cancel()
				}
			})
		}
		moved := out.offset
		var reached int64
		if opts.Text != "" {
			err = r.agent.FollowText(fctx, pod, string(sj.UID), agentapi.TextMode(opts.Text), out.textSink())
		} else {
			reached, err = r.agent.Follow(fctx, pod, string(sj.UID), from, out)
		}
		replaced := fctx.Err() != nil && ctx.Err() == nil
		cancel()
		// What went out is never sent again: a follow tried again, after
		// a cut or a cancel, goes on from there.
		progressed := out.offset > moved || reached > offset
		offset = max(offset, reached, out.offset)
		out.offset = offset
		switch {
		case err == nil && opts.Text != "":
			return out.endText()
		case err == nil:
			if err := out.end(reached); err != nil {
				return err
			}
			if opts.Deliver && out.exited != nil && out.exited.LeftNoFiles() {
				r.jobs.markDelivered(ctx, key, sj.UID)
			}
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case replaced:
			continue // placed again, or ended without running
		case errors.Is(err, agentapi.ErrUnknownJob):
			if _, lost := r.jobs.workerNow(ctx, sj); lost != nil {
				return lost
			}
			return gone(fmt.Sprintf("the output of shelljob %s is lost: its worker %s does not have it any more (the worker was replaced, or the job's spool removed once the job was delivered): %v", key.Name, pod, err))
		case errors.Is(err, agentapi.ErrProtocol), errors.Is(err, agentapi.ErrUsage):
			return apierrors.NewInternalError(fmt.Errorf("follow shelljob %s: %w", key.Name, err))
		case opts.Text != "" && out.text > 0:
			// A text stream cut half way is read again from its start.
			return err
		}
		if progressed {
			tries = 0
		}
		if tries++; tries > followRetryMost {
			return apierrors.NewServiceUnavailable(fmt.Sprintf("the agent of shelljob %s's worker %s does not answer: %v", key.Name, pod, err))
		}
		select {
		case <-time.After(min(followRetry<<(tries-1), followRetryMax)):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// logOut is where a follow goes: the response, as frames or as the
// output's text, counting the offset.
type logOut struct {
	resp *response
	// frames writes the framed stream; nil for the text.
	frames *agentapi.FrameWriter
	// offset is the follow's, past what went out.
	offset int64
	// text counts the bytes of a final text.
	text int64
	// exit: the reader asked for the job's exit frame; exited is the
	// exit that went out in it.
	exit   bool
	exited *agentapi.Event
}

var _ agentapi.ExitSink = (*logOut)(nil)

// Write implements io.Writer: output kept.
func (o *logOut) Write(p []byte) (int, error) {
	if err := o.Data(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Data implements agentapi.FollowSink.
func (o *logOut) Data(p []byte) error {
	err := o.resp.do(func() error {
		if o.frames != nil {
			return o.frames.Data(p)
		}
		_, err := o.resp.Write(p)
		return err
	})
	if err != nil {
		return err
	}
	o.offset += int64(len(p))
	return nil
}

// Gap implements agentapi.FollowSink.
func (o *logOut) Gap(n int64) error { return o.skipped(n, o.frames.Gap, agentapi.GapLine) }

// AfterStop implements agentapi.FollowSink.
func (o *logOut) AfterStop(n int64) error {
	return o.skipped(n, o.frames.AfterStop, agentapi.AfterStopLine)
}

// skipped hands on n bytes that were not kept: frame writes their frame,
// line the line that stands for them in the text.
func (o *logOut) skipped(n int64, frame func(int64) error, line func(int64) string) error {
	err := o.resp.do(func() error {
		if o.frames != nil {
			return frame(n)
		}
		_, err := io.WriteString(o.resp, line(n))
		return err
	})
	if err != nil {
		return err
	}
	o.offset += n
	return nil
}

// Exit implements agentapi.ExitSink: the x frame, for a reader that
// asked.
func (o *logOut) Exit(e agentapi.Event) error {
	if !o.exit {
		return nil
	}
	if err := o.resp.do(func() error { return o.frames.Exit(e) }); err != nil {
		return err
	}
	o.exited = &e
	return nil
}

// end closes the output at offset: the e frame of a framed stream.
func (o *logOut) end(offset int64) error {
	if o.frames == nil {
		return nil
	}
	return o.resp.do(func() error { return o.frames.End(max(offset, 0)) })
}

// textSink is where a final text goes: its data frames, or its bytes.
func (o *logOut) textSink() io.Writer { return textOut{o} }

// endText closes a final text: the e frame gives its length.
func (o *logOut) endText() error { return o.end(o.text) }

type textOut struct{ o *logOut }

func (t textOut) Write(p []byte) (int, error) {
	err := t.o.resp.do(func() error {
		if t.o.frames != nil {
			return t.o.frames.Data(p)
		}
		_, err := t.o.resp.Write(p)
		return err
	})
	if err != nil {
		return 0, err
	}
	t.o.text += int64(len(p))
	return len(p), nil
}
