package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/idle"
)

// Client talks to a daemon over its socket. Its methods are those of
// agentapi.Client, for the daemon it was made for.
type Client struct {
	socket string
	// idle, when positive, cuts a follow, put-files or get-files stream
	// that moved no byte for that long while it waited on the daemon.
	idle time.Duration
}

// NewClient returns a Client of the daemon listening on socket.
func NewClient(socket string) *Client { return &Client{socket: socket} }

// watch bounds a stream by the client's idle limit, if any.
func (c *Client) watch(ctx context.Context) (context.Context, *idle.Watch) {
	return idle.New(ctx, c.idle, fmt.Errorf("no byte moved for %s: %w", c.idle, agentapi.ErrStreamIdle))
}

// ctxErr is ctx's error with its cause, such as the idle watch's.
func ctxErr(ctx context.Context) error {
	if ctx.Err() == nil {
		return nil
	}
	return context.Cause(ctx)
}

// stream is an answered request: the rest of its stream is in r.
type stream struct {
	conn net.Conn
	r    *bufio.Reader
	stop func() bool
}

// Close ends the stream.
func (s *stream) Close() error {
	s.stop()
	return s.conn.Close()
}

// call sends req, and body after it when set, and reads the reply. The
// stream is cut when ctx ends. watch, unless nil, sees the bytes of body
// and of the answer.
func (c *Client) call(ctx context.Context, req request, body io.Reader, watch *idle.Watch) (*stream, reply, error) {
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, "unix", c.socket)
	if err != nil {
		return nil, reply{}, fmt.Errorf("reach agent: %w", err)
	}
	s := &stream{conn: conn, stop: context.AfterFunc(ctx, func() { conn.Close() })}
	fail := func(err error) (*stream, reply, error) {
		s.Close()
		if ctx.Err() != nil {
			err = ctxErr(ctx)
		}
		return nil, reply{}, err
	}
	b, err := json.Marshal(req)
	if err != nil {
		return fail(err)
	}
	if _, err := conn.Write(append(b, '\n')); err != nil {
		return fail(fmt.Errorf("send request: %w", err))
	}
	var sendErr error
	if body != nil {
		if _, sendErr = io.Copy(conn, watch.Reader(body)); sendErr == nil {
			sendErr = conn.(*net.UnixConn).CloseWrite()
		}
	}
	s.r = bufio.NewReaderSize(watch.Source(conn), 64<<10)
	line, err := s.r.ReadBytes('\n')
	if err != nil {
		if sendErr != nil {
			err = sendErr
		}
		return fail(fmt.Errorf("read reply: %w", err))
	}
	var rep reply
	if err := json.Unmarshal(line, &rep); err != nil {
		return fail(fmt.Errorf("read reply: %w", err))
	}
	if rep.Error != "" {
		return fail(&Error{Msg: rep.Error, Code: rep.Code})
	}
	if sendErr != nil {
		return fail(fmt.Errorf("send: %w", sendErr))
	}
	return s, rep, nil
}

// Ping returns once the daemon answers.
func (c *Client) Ping(ctx context.Context) error {
	return c.do(ctx, request{Op: agentapi.CmdPing})
}

// Delivered marks the job delivered; see agentapi.Client.
func (c *Client) Delivered(ctx context.Context, job string) error {
	return c.do(ctx, request{Op: agentapi.CmdDelivered, Job: job})
}

// Hangup hangs up the console of Console job, and ends its attach of
// session (any with none); see agentapi.Client.
func (c *Client) Hangup(ctx context.Context, job, session string) error {
	return c.do(ctx, request{Op: agentapi.CmdHangup, Job: job, Session: session})
}

// do makes a call whose answer is its reply alone.
func (c *Client) do(ctx context.Context, req request) error {
	st, _, err := c.call(ctx, req, nil, nil)
	if err != nil {
		return err
	}
	return st.Close()
}

// Start runs a command; see agentapi.Client.
func (c *Client) Start(ctx context.Context, req agentapi.StartRequest) (agentapi.StartResponse, error) {
	st, rep, err := c.call(ctx, request{Op: agentapi.CmdStart, Job: req.Job, Start: &req}, nil, nil)
	if err != nil {
		return agentapi.StartResponse{}, err
	}
	st.Close()
	if rep.Start == nil {
		return agentapi.StartResponse{}, errors.New("start: empty reply")
	}
	return *rep.Start, nil
}

// Signal sends sig to the job's process group; see agentapi.Client.
func (c *Client) Signal(ctx context.Context, job string, sig agentapi.Signal) (agentapi.SignalResponse, error) {
	st, rep, err := c.call(ctx, request{Op: agentapi.CmdSignal, Job: job, Signal: sig}, nil, nil)
	if err != nil {
		return agentapi.SignalResponse{}, err
	}
	st.Close()
	if rep.Signal == nil {
		return agentapi.SignalResponse{}, errors.New("signal: empty reply")
	}
	return *rep.Signal, nil
}

// EventLines copies the event stream, JSON lines, to w until ctx ends or
// the daemon ends it; see agentapi.Client.Events.
func (c *Client) EventLines(ctx context.Context, w io.Writer) error {
	st, _, err := c.call(ctx, request{Op: agentapi.CmdEvents}, nil, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	_, err = io.Copy(w, st.r)
	return streamEnd(ctx, err, "events")
}

// Events streams the events of every job; see agentapi.Client.
func (c *Client) Events(ctx context.Context, handle func(agentapi.Event)) error {
	st, _, err := c.call(ctx, request{Op: agentapi.CmdEvents}, nil, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	return streamEnd(ctx, agentapi.DecodeEvents(st.r, handle), "events")
}

// streamEnd is the error of a stream that ended: ctx's, or a break.
func streamEnd(ctx context.Context, err error, what string) error {
	if ctx.Err() != nil {
		return ctxErr(ctx)
	}
	if err == nil || errors.Is(err, io.EOF) {
		return fmt.Errorf("%s stream ended by the agent: %w", what, io.ErrUnexpectedEOF)
	}
	return fmt.Errorf("%s stream: %w", what, err)
}

// FollowFrames copies the framed follow stream to w, as it comes, with
// the job's exit frame before its end when exit is set.
func (c *Client) FollowFrames(ctx context.Context, job string, offset int64, exit bool, w io.Writer) error {
	ctx, watch := c.watch(ctx)
	defer watch.Stop()
	st, _, err := c.call(ctx, request{Op: agentapi.CmdFollow, Job: job, Offset: offset, Exit: exit}, nil, watch)
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := io.Copy(watch.Writer(w), st.r); err != nil {
		return streamEnd(ctx, err, "follow")
	}
	return ctxErr(ctx)
}

// FollowText writes the job's final text stream in mode to w
// (agentapi.TextMagic): its output from the start, escaped and rendered
// here, in this process, as the follow comes.
func (c *Client) FollowText(ctx context.Context, job string, mode agentapi.TextMode, w io.Writer) error {
	ctx, watch := c.watch(ctx)
	defer watch.Stop()
	st, _, err := c.call(ctx, request{Op: agentapi.CmdFollow, Job: job}, nil, watch)
	if err != nil {
		return err
	}
	defer st.Close()
	text := agentapi.NewTextWriter(watch.Writer(w), mode)
	_, err = agentapi.DecodeFollow(st.r, 0, text, text.Keepalive)
	if err == nil {
		err = text.End()
	}
	if err != nil {
		return streamEnd(ctx, err, "follow")
	}
	return ctxErr(ctx)
}

// Follow copies the job's output from offset to w; see agentapi.Client.
// A w that is an agentapi.ExitSink gets the job's exit.
func (c *Client) Follow(ctx context.Context, job string, offset int64, w io.Writer) (int64, error) {
	ctx, watch := c.watch(ctx)
	defer watch.Stop()
	_, exit := w.(agentapi.ExitSink)
	st, _, err := c.call(ctx, request{Op: agentapi.CmdFollow, Job: job, Offset: offset, Exit: exit}, nil, watch)
	if err != nil {
		return offset, err
	}
	defer st.Close()
	pos, err := agentapi.DecodeFollow(st.r, offset, agentapi.NearSink(watch, agentapi.SinkOf(w)), nil)
	if err != nil && ctx.Err() != nil {
		err = ctxErr(ctx)
	}
	return pos, err
}

// PutFiles unpacks a tar stream into the job's $SHELLJOB_OUT.
func (c *Client) PutFiles(ctx context.Context, job string, tar io.Reader) error {
	ctx, watch := c.watch(ctx)
	defer watch.Stop()
	st, _, err := c.call(ctx, request{Op: agentapi.CmdPutFiles, Job: job}, tar, watch)
	if err != nil {
		return err
	}
	return st.Close()
}

// GetFiles writes the job's $SHELLJOB_OUT as a tar stream, from byte
// offset of it on (Daemon.GetFiles).
func (c *Client) GetFiles(ctx context.Context, job string, offset int64, w io.Writer) error {
	ctx, watch := c.watch(ctx)
	defer watch.Stop()
	st, _, err := c.call(ctx, request{Op: agentapi.CmdGetFiles, Job: job, Offset: offset}, nil, watch)
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := io.Copy(watch.Writer(w), st.r); err != nil {
		return streamEnd(ctx, err, "files")
	}
	return ctxErr(ctx)
}

// Stop escalates as the operator does, along agentapi.NextStop: SIGINT,
// SIGTERM step later and SIGKILL step after that, ending at the first step
// that finds the group empty. onStep, if set, hears each step.
func (c *Client) Stop(ctx context.Context, job string, step time.Duration, onStep func(agentapi.Signal, agentapi.SignalResponse)) error {
	sig, done := agentapi.NextStop("", false)
	for !done {
		resp, err := c.Signal(ctx, job, sig)
		if err != nil {
			return err
		}
		if onStep != nil {
			onStep(sig, resp)
		}
		if sig, done = agentapi.NextStop(sig, resp.GroupEmpty); !done {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(step):
			}
		}
	}
	return nil
}

// Attach relays in to the terminal of Console job's console, each size
// from sizes (nil for none) to its window, and its output, from its start,
// to out, until the console ends; it returns the exit status of the
// console's command. It waits for the console to start, up to the
// daemon's AttachStartWait. The end of in hangs the console up, as the end
// of ctx does (it closes the connection); Attach may return before a Read
// of in it began has. A hangup (Hangup) cuts it: it returns an error.
func (c *Client) Attach(ctx context.Context, job string, in io.Reader, out io.Writer, sizes <-chan WindowSize) (int, error) {
	return c.attach(ctx, request{Op: agentapi.CmdAttach, Job: job}, in, out, sizes)
}

// AttachSession is Attach named session (agentapi.FlagSession), for the
// attach subcommand alone: a hangup of session kills the calling process,
// which a runtime may keep blocked on the output of a cut exec for ever.
func (c *Client) AttachSession(ctx context.Context, job, session string, in io.Reader, out io.Writer, sizes <-chan WindowSize) (int, error) {
	return c.attach(ctx, request{Op: agentapi.CmdAttach, Job: job, Session: session}, in, out, sizes)
}

func (c *Client) attach(ctx context.Context, req request, in io.Reader, out io.Writer, sizes <-chan WindowSize) (int, error) {
	st, _, err := c.call(ctx, req, nil, nil)
	if err != nil {
		return 0, err
	}
	defer st.Close()
	iw := &inputWriter{w: st.conn}
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case s, ok := <-sizes:
				if !ok || iw.size(s) != nil {
					return
				}
			case <-done:
				return
			}
		}
	}()
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := in.Read(buf)
			if n > 0 && iw.data(buf[:n]) != nil {
				return
			}
			if err != nil {
				iw.mu.Lock()
				_ = st.conn.(*net.UnixConn).CloseWrite()
				iw.mu.Unlock()
				return
			}
		}
	}()
	// st.r is a bufio.Reader of the size DecodeFollow asks for, so that it
	// reads the frames from st.r itself, and the exit line after them is
	// still there.
	if _, err := agentapi.DecodeFollow(st.r, 0, terminalSink{out}, nil); err != nil {
		return 0, streamEnd(ctx, err, "attach")
	}
	line, err := st.r.ReadString('\n')
	if err != nil {
		return 0, streamEnd(ctx, err, "attach")
	}
	var kind byte
	var code int
	if _, err := fmt.Sscanf(line, "%c %d\n", &kind, &code); err != nil || kind != exitLine {
		return 0, fmt.Errorf("attach: bad exit line %q: %w", line, agentapi.ErrProtocol)
	}
	return code, nil
}

// terminalSink writes a console's output to a terminal, with the lines
// for what the spool did not keep in the terminal's line ends.
type terminalSink struct{ w io.Writer }

func (t terminalSink) Data(p []byte) error { _, err := t.w.Write(p); return err }

func (t terminalSink) Gap(n int64) error {
	_, err := io.WriteString(t.w, strings.ReplaceAll(agentapi.GapLine(n), "\n", "\r\n"))
	return err
}

func (t terminalSink) AfterStop(n int64) error {
	_, err := io.WriteString(t.w, strings.ReplaceAll(agentapi.AfterStopLine(n), "\n", "\r\n"))
	return err
}
