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
}

// control runs the pod's control channel until ctx ends or the channel
// breaks: events go to handle, and while the channel is up, Start and
// Signal to the pod go over it. It returns errNoControl, before any event,
// when the agent has no control channel.
func (c *Client) control(ctx context.Context, pod types.NamespacedName, handle func(agentapi.Event)) error {
	ctx, cut := context.WithCancelCause(ctx)
	defer cut(nil)
	ch := &channel{
		pod: pod, out: make(chan []byte), done: make(chan struct{}), cut: cut,
		pending: map[uint64]chan agentapi.ControlMessage{},
	}
	defer c.unregister(ch)

	stdinR, stdinW := io.Pipe()
	go func() {
		for {
			select {
			case line := <-ch.out:
				if _, err := stdinW.Write(line); err != nil {
					cut(err)
					return
				}
			case <-ctx.Done():
				stdinW.Close()
				return
			}
		}
	}()
	up := false
	streamErr, readErr := c.streamIn(ctx, pod, argv(agentapi.CmdControl), stdinR, func(r io.Reader) error {
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
			if m.Event != nil {
				handle(*m.Event)
				continue
			}
			ch.answer(m)
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

// answer hands an answer to its call.
func (ch *channel) answer(m agentapi.ControlMessage) {
	ch.mu.Lock()
	reply := ch.pending[m.ID]
	delete(ch.pending, m.ID)
	ch.mu.Unlock()
	if reply != nil {
		reply <- m // buffered: a call that gave up does not block the reader
	}
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
	if m.Error != "" {
		if known := agentapi.ExitError(m.Code); known != nil {
			return m, true, fmt.Errorf("agent %s in pod %s: %s: %w", req.Op, pod, m.Error, known)
		}
		return m, true, fmt.Errorf("agent %s in pod %s: %s", req.Op, pod, m.Error)
	}
	return m, true, nil
}
