package agentclient

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/deflate"
	"shelljob.dev/shelljob/internal/idle"
)

// channelCallTimeout bounds a call over a warm channel. A channel that
// answers nothing in that time is taken for hung: it is cut, so that its
// stream opens again, and the call goes through a one-shot exec.
const channelCallTimeout = 5 * time.Second

// errChannelDown: the call could not go, or could not be answered, over
// the pod's control channel; a one-shot exec takes it.
var errChannelDown = errors.New("control channel down")

// errNoControl: the agent does not have the control channel (an image
// older than protocol 2), so the events stream runs alone.
var errNoControl = errors.New("agent has no control channel")

// readerIdle is how long a reader's channel (Options.ShareFollows) stays
// open without a follow.
const readerIdle = 2 * time.Minute

// keepaliveInterval is how often a channel pings its agent, which ends a
// channel whose caller went quiet (agentapi.ControlKeepalive).
const keepaliveInterval = agentapi.ControlKeepalive

// channelIdle cuts a channel that got no message, an agent's keepalive
// included, for three of them: its agent or its connection hangs, and its
// events would stop without an end. The agent ends a quiet caller's
// channel after as long.
const channelIdle = 3 * agentapi.ControlKeepalive

// channel is one pod's warm control channel, while its exec runs.
type channel struct {
	pod  types.NamespacedName
	out  chan []byte
	done chan struct{}
	cut  context.CancelCauseFunc

	mu      sync.Mutex
	closed  bool
	next    uint64
	pending map[uint64]chan agentapi.ControlMessage
	// streams are the follows running over the channel.
	streams map[uint64]*followStream
	// used is when the last follow over it started or ended.
	used time.Time
	// idle is the idle limit of its follows.
	idle time.Duration
}

// control runs the pod's control channel until ctx ends or the channel
// breaks. With handle, the channel carries the pod's events to it;
// without, it carries answers only and closes once no follow went over it
// for readerIdle. While the channel is up, Start, Signal and Follow to the
// pod go over it. It returns errNoControl, before any message, when the
// agent has no control channel, and an error that wraps
// agentapi.ErrStreamIdle once no message came for channelIdle.
func (c *Client) control(ctx context.Context, pod types.NamespacedName, handle func(agentapi.Event)) error {
	c.mu.Lock()
	lacks := c.noControl[pod]
	c.mu.Unlock()
	if lacks {
		return errNoControl
	}
	ctx, watch := c.eventsWatch(ctx)
	defer watch.Stop()
	ctx, cut := context.WithCancelCause(ctx)
	defer cut(nil)
	ch := &channel{
		pod: pod, out: make(chan []byte), done: make(chan struct{}), cut: cut,
		pending: map[uint64]chan agentapi.ControlMessage{},
		streams: map[uint64]*followStream{},
		used:    time.Now(),
		idle:    c.idle,
	}
	defer c.unregister(ch)
	command := argv(agentapi.CmdControl)
	if handle == nil {
		command = append(command, agentapi.FlagNoEvents)
		go ch.closeIdle(ctx)
	}

	stdinR, stdinW := io.Pipe()
	go func() {
		keepalive := time.NewTicker(keepaliveInterval)
		defer keepalive.Stop()
		ping, _ := json.Marshal(agentapi.ControlRequest{Op: agentapi.OpPing})
		ping = append(ping, '\n')
		for {
			var line []byte
			select {
			case line = <-ch.out:
			case <-keepalive.C:
				line = ping
			case <-ctx.Done():
				stdinW.Close()
				return
			}
			if _, err := stdinW.Write(line); err != nil {
				cut(err)
				return
			}
		}
	}()
	up := false
	streamErr, readErr := c.streamIn(ctx, pod, command, stdinR, watch, func(r io.Reader) error {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			var m agentapi.ControlMessage
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				return fmt.Errorf("control message %q: %w", sc.Bytes(), err)
			}
			if !up {
				// The exec runs: calls can go over it.
				up = true
				c.register(ch)
			}
			switch {
			case m.Event != nil:
				if handle != nil {
					handle(*m.Event)
				}
			case m.ID != 0:
				ch.answer(m)
			}
		}
		if err := sc.Err(); err != nil {
			return err
		}
		return io.EOF
	})
	// Ends the exec's stdin copy, and the writer's write if one waits.
	stdinW.Close()
	if cause := context.Cause(ctx); ctx.Err() != nil && !errors.Is(cause, context.Canceled) {
		return fmt.Errorf("agent control in pod %s: %w", pod, cause)
	}
	if streamErr != nil {
		if !up && (errors.Is(streamErr, agentapi.ErrUsage) || errors.Is(streamErr, agentapi.ErrProtocol)) {
			// Asked once per pod: its agent does not change.
			c.mu.Lock()
			c.noControl[pod] = true
			c.mu.Unlock()
			return fmt.Errorf("%w: %w", errNoControl, streamErr)
		}
		return streamErr
	}
	if readErr != nil && !errors.Is(readErr, io.EOF) {
		return fmt.Errorf("agent control in pod %s: %w", pod, readErr)
	}
	return fmt.Errorf("agent control in pod %s: stream ended: %w", pod, io.ErrUnexpectedEOF)
}

// register makes ch the pod's channel for calls.
func (c *Client) register(ch *channel) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.channels[ch.pod] = ch
}

// unregister closes ch: its waiting calls go through one-shot execs.
func (c *Client) unregister(ch *channel) {
	c.mu.Lock()
	if c.channels[ch.pod] == ch {
		delete(c.channels, ch.pod)
	}
	c.mu.Unlock()
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if !ch.closed {
		ch.closed = true
		close(ch.done)
	}
	for id, s := range ch.streams {
		s.pw.CloseWithError(errChannelDown)
		delete(ch.streams, id)
	}
}

// channel returns the pod's channel while it is up, or nil.
func (c *Client) channel(pod types.NamespacedName) *channel {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.channels[pod]
}

// ChannelUp tells whether calls to the pod go over its warm control
// channel now.
func (c *Client) ChannelUp(pod types.NamespacedName) bool { return c.channel(pod) != nil }

// answer hands an answer to its call, or a piece of a follow to its
// stream. A stream's reader that stops reading holds the channel's other
// messages back until it is done: it is the reader's own channel.
func (ch *channel) answer(m agentapi.ControlMessage) {
	ch.mu.Lock()
	reply := ch.pending[m.ID]
	delete(ch.pending, m.ID)
	stream := ch.streams[m.ID]
	if m.End {
		delete(ch.streams, m.ID)
		ch.used = time.Now()
	}
	ch.mu.Unlock()
	switch {
	case reply != nil:
		reply <- m // buffered: a call that gave up does not block the reader
	case stream != nil && m.End:
		stream.pw.CloseWithError(answerError(agentapi.CmdFollow, ch.pod, m))
	case stream != nil && m.Deflated:
		if err := deflate.Inflate(stream.w, m.Data); err != nil {
			// A reader gone, or a piece that does not inflate: the
			// follow breaks, and its reader goes on from its offset.
			stream.pw.CloseWithError(err)
		}
	case stream != nil:
		// A reader gone closed its end: the write fails at once.
		_, _ = stream.w.Write(m.Data)
	}
}

// closeIdle cuts a reader's channel once no follow went over it for
// readerIdle.
func (ch *channel) closeIdle(ctx context.Context) {
	t := time.NewTicker(readerIdle / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			ch.mu.Lock()
			idle := len(ch.streams) == 0 && now.Sub(ch.used) > readerIdle
			ch.mu.Unlock()
			if idle {
				ch.cut(context.Canceled)
				return
			}
		}
	}
}

// followStream is a follow over the channel: its pieces go to pw, through
// its idle watch.
type followStream struct {
	pw *io.PipeWriter
	w  io.Writer
}

// follow runs a follow over the channel, bounded by the idle limit: a
// follow cut idle cuts the channel too, hung for every follow over it. ok
// is false when it must go through a one-shot exec: the channel went down
// before any of it came.
func (ch *channel) follow(ctx context.Context, job string, offset int64, w io.Writer) (reached int64, ok bool, err error) {
	reached = offset
	ok, err = ch.stream(ctx, agentapi.ControlRequest{Op: agentapi.CmdFollow, Job: job, Offset: offset, Deflate: true, Exit: true}, func(r io.Reader) (bool, error) {
		var err error
		reached, err = agentapi.ReadFollow(r, offset, w)
		return reached > max(offset, 0), err
	})
	return reached, ok, err
}

// followText is follow of the job's final text stream in mode.
func (ch *channel) followText(ctx context.Context, job string, mode agentapi.TextMode, w io.Writer) (ok bool, err error) {
	cw := &countingWriter{w: w}
	return ch.stream(ctx, agentapi.ControlRequest{Op: agentapi.CmdFollow, Job: job, Text: mode, Deflate: true}, func(r io.Reader) (bool, error) {
		err := agentapi.ReadText(r, mode, cw)
		return cw.n > 0, err
	})
}

// stream sends req, a follow, and reads its stream with read, which tells
// whether anything of it reached the caller.
func (ch *channel) stream(ctx context.Context, req agentapi.ControlRequest, read func(io.Reader) (moved bool, err error)) (ok bool, err error) {
	wctx, watch := idle.New(ctx, ch.idle, idleError(ch.idle))
	defer watch.Stop()
	pr, pw := io.Pipe()
	ch.mu.Lock()
	if ch.closed {
		ch.mu.Unlock()
		return false, nil
	}
	ch.next++
	req.ID = ch.next
	ch.streams[req.ID] = &followStream{pw: pw, w: watch.Writer(pw)}
	ch.used = time.Now()
	ch.mu.Unlock()
	line, err := json.Marshal(req)
	if err != nil {
		return true, err
	}
	select {
	case ch.out <- append(line, '\n'):
	case <-ch.done:
		return false, nil
	case <-wctx.Done():
		return ch.followCut(ctx, wctx, req.ID, req.Job)
	}
	stop := context.AfterFunc(wctx, func() { pr.CloseWithError(context.Cause(wctx)) })
	defer stop()
	moved, err := read(pr)
	pr.Close()
	switch {
	case err == nil:
		return true, nil
	case wctx.Err() != nil:
		return ch.followCut(ctx, wctx, req.ID, req.Job)
	case errors.Is(err, errChannelDown) && !moved:
		return false, nil
	}
	return true, err
}

// followCut ends a follow whose context ended: the caller's, or the idle
// watch's, which cuts the channel.
func (ch *channel) followCut(ctx, wctx context.Context, id uint64, job string) (bool, error) {
	if ctx.Err() != nil {
		ch.cancelStream(id)
		return true, ctx.Err()
	}
	cause := context.Cause(wctx)
	ch.cut(fmt.Errorf("follow of %s: %w", job, cause))
	return true, fmt.Errorf("agent follow of %s in pod %s: %w", job, ch.pod, cause)
}

// countingWriter counts what it writes to w.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// cancelStream asks the agent to end a follow its reader left.
func (ch *channel) cancelStream(id uint64) {
	ch.mu.Lock()
	delete(ch.streams, id)
	ch.mu.Unlock()
	line, _ := json.Marshal(agentapi.ControlRequest{ID: id, Op: agentapi.OpCancel})
	select {
	case ch.out <- append(line, '\n'):
	case <-ch.done:
	case <-time.After(channelCallTimeout):
	}
}

// answerError is the error of a failed answer, nil for none.
func answerError(op string, pod types.NamespacedName, m agentapi.ControlMessage) error {
	if m.Error == "" {
		return nil
	}
	if known := agentapi.ExitError(m.Code); known != nil {
		return fmt.Errorf("agent %s in pod %s: %s: %w", op, pod, m.Error, known)
	}
	return fmt.Errorf("agent %s in pod %s: %s", op, pod, m.Error)
}

// call sends req and waits for its answer. It fails with errChannelDown
// when the channel goes down first or does not answer in time; with ctx's
// error when ctx ends first.
func (ch *channel) call(ctx context.Context, req agentapi.ControlRequest) (agentapi.ControlMessage, error) {
	reply := make(chan agentapi.ControlMessage, 1)
	ch.mu.Lock()
	if ch.closed {
		ch.mu.Unlock()
		return agentapi.ControlMessage{}, errChannelDown
	}
	ch.next++
	req.ID = ch.next
	ch.pending[req.ID] = reply
	ch.mu.Unlock()
	defer func() {
		ch.mu.Lock()
		delete(ch.pending, req.ID)
		ch.mu.Unlock()
	}()
	line, err := json.Marshal(req)
	if err != nil {
		return agentapi.ControlMessage{}, err
	}
	timer := time.NewTimer(channelCallTimeout)
	defer timer.Stop()
	hung := func() (agentapi.ControlMessage, error) {
		ch.cut(fmt.Errorf("no answer to %s in %s", req.Op, channelCallTimeout))
		return agentapi.ControlMessage{}, errChannelDown
	}
	select {
	case ch.out <- append(line, '\n'):
	case <-ch.done:
		return agentapi.ControlMessage{}, errChannelDown
	case <-ctx.Done():
		return agentapi.ControlMessage{}, ctx.Err()
	case <-timer.C:
		return hung()
	}
	select {
	case m := <-reply:
		return m, nil
	case <-ch.done:
		select {
		case m := <-reply:
			return m, nil
		default:
			return agentapi.ControlMessage{}, errChannelDown
		}
	case <-ctx.Done():
		return agentapi.ControlMessage{}, ctx.Err()
	case <-timer.C:
		return hung()
	}
}

// viaChannel makes a call over the pod's channel. ok is false when it
// must go through a one-shot exec: there is no channel, or it went down.
// A signal whose channel broke after it was sent may so be sent twice.
func (c *Client) viaChannel(ctx context.Context, pod types.NamespacedName, req agentapi.ControlRequest) (m agentapi.ControlMessage, ok bool, err error) {
	ch := c.channel(pod)
	if ch == nil {
		return m, false, nil
	}
	m, err = ch.call(ctx, req)
	if errors.Is(err, errChannelDown) {
		return m, false, nil
	}
	if err != nil {
		return m, true, fmt.Errorf("agent %s in pod %s: %w", req.Op, pod, err)
	}
	return m, true, answerError(req.Op, pod, m)
}

// answered unpacks a call's answer over a channel: the part of it that
// pick takes, which must be there.
func answered[T any](pod types.NamespacedName, op string, m agentapi.ControlMessage, err error, pick func(agentapi.ControlMessage) *T) (T, error) {
	var zero T
	if err != nil {
		return zero, err
	}
	v := pick(m)
	if v == nil {
		return zero, fmt.Errorf("agent %s in pod %s: empty answer", op, pod)
	}
	return *v, nil
}

// shareFollows opens a reader's channel to the pod in the background, if
// none is open or opening, for the follows to come.
func (c *Client) shareFollows(pod types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.channels[pod] != nil || c.opening[pod] || c.noControl[pod] {
		return
	}
	c.opening[pod] = true
	go func() {
		_ = c.control(context.Background(), pod, nil)
		c.mu.Lock()
		delete(c.opening, pod)
		c.mu.Unlock()
	}()
}
