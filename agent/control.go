package agent

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/deflate"
)

// maxControlLine bounds a control request: a start of a 64 KiB command,
// escaped, fits with room to spare.
const maxControlLine = 1 << 20

// controlIdle ends a control channel that got no line, a request or a
// ping, for that long: its caller is gone.
var controlIdle = 3 * agentapi.ControlKeepalive

// ControlOptions configure a control channel.
type ControlOptions struct {
	// Events makes the channel carry the event stream.
	Events bool
	// Keepalive is how often the channel gets an empty message while the
	// daemon answers. Defaults to agentapi.ControlKeepalive.
	Keepalive time.Duration
}

// Control serves the warm control channel of one exec: it writes an empty
// message, then the event stream's events (with opts.Events) to out as
// ControlMessages, and answers each ControlRequest read from in,
// concurrently, on the same out. An empty message goes out every
// opts.Keepalive while the daemon answers a ping, so that the caller
// tells a quiet channel from a hung one. It returns when in ends (the exec
// is gone), the event stream breaks, or ctx ends.
func (c *Client) Control(ctx context.Context, in io.Reader, out io.Writer, opts ControlOptions) error {
	ctx, cancel := context.WithCancelCause(ctx)
	w := &controlWriter{enc: json.NewEncoder(out)}
	if err := w.send(agentapi.ControlMessage{}); err != nil {
		cancel(nil)
		return err
	}
	var wg sync.WaitGroup
	// The goroutines end with ctx, whatever the channel ends with.
	defer wg.Wait()
	defer cancel(nil)
	wg.Go(func() { c.keepAlive(ctx, w, cmp.Or(opts.Keepalive, agentapi.ControlKeepalive)) })
	if opts.Events {
		wg.Go(func() {
			err := c.Events(ctx, func(e agentapi.Event) {
				if err := w.send(agentapi.ControlMessage{Event: &e}); err != nil {
					cancel(err)
				}
			})
			cancel(err)
		})
	}
	follows := &followSet{cancels: map[uint64]context.CancelFunc{}}

	lines := make(chan []byte)
	go func() {
		// Not in wg: a read of in cannot be cut, and the exec closes in
		// once it ends.
		defer close(lines)
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 0, 64<<10), maxControlLine)
		for sc.Scan() {
			select {
			case lines <- append([]byte(nil), sc.Bytes()...):
			case <-ctx.Done():
				return
			}
		}
		if err := sc.Err(); err != nil {
			cancel(fmt.Errorf("read control request: %w", err))
			return
		}
		cancel(io.EOF)
	}()
	idle := time.NewTimer(controlIdle)
	defer idle.Stop()
	for {
		select {
		case <-ctx.Done():
			if err := context.Cause(ctx); !errors.Is(err, io.EOF) {
				return err
			}
			return nil
		case <-idle.C:
			return fmt.Errorf("no request or ping in %s: the caller is gone", controlIdle)
		case line, ok := <-lines:
			if !ok {
				continue // the cause is set
			}
			idle.Reset(controlIdle)
			var req agentapi.ControlRequest
			if err := json.Unmarshal(line, &req); err != nil {
				return fmt.Errorf("control request %q: %w", line, err)
			}
			switch req.Op {
			case agentapi.OpPing:
			case agentapi.OpCancel:
				follows.cancel(req.ID)
			case agentapi.CmdFollow:
				fctx := follows.add(ctx, req.ID)
				wg.Go(func() {
					defer follows.cancel(req.ID)
					if err := c.followTo(fctx, w, req); err != nil {
						cancel(err)
					}
				})
			default:
				wg.Go(func() {
					if err := w.send(c.answer(ctx, req)); err != nil {
						cancel(err)
					}
				})
			}
		}
	}
}

// keepAlive sends an empty message every interval in which the daemon
// answered a ping, until ctx ends or a send fails.
func (c *Client) keepAlive(ctx context.Context, w *controlWriter, interval time.Duration) {
	every(ctx, interval, func() bool {
		pctx, cancel := context.WithTimeout(ctx, interval)
		err := c.Ping(pctx)
		cancel()
		return err != nil || w.send(agentapi.ControlMessage{}) == nil
	})
}

// every calls fn each interval, from one interval on, until ctx ends or fn
// returns false.
func every(ctx context.Context, interval time.Duration, fn func() bool) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !fn() {
			return
		}
	}
}

// answer runs one control request.
func (c *Client) answer(ctx context.Context, req agentapi.ControlRequest) agentapi.ControlMessage {
	m := agentapi.ControlMessage{ID: req.ID}
	var err error
	switch req.Op {
	case agentapi.CmdStart:
		if req.Start == nil {
			err = errors.New("start without a request")
			break
		}
		var resp agentapi.StartResponse
		if resp, err = c.Start(ctx, *req.Start); err == nil {
			m.Start = &resp
		}
	case agentapi.CmdSignal:
		var resp agentapi.SignalResponse
		if resp, err = c.Signal(ctx, req.Job, req.Signal); err == nil {
			m.Signal = &resp
		}
	case agentapi.CmdDelivered:
		err = c.Delivered(ctx, req.Job)
	case agentapi.CmdHangup:
		err = c.Hangup(ctx, req.Job, req.Session)
	default:
		err = fmt.Errorf("unknown control operation %q: %w", req.Op, agentapi.ErrUsage)
	}
	if err != nil {
		m.Error, m.Code = err.Error(), ExitCode(err)
	}
	return m
}

// followTo streams a follow to w as the request's Data messages, then its
// End. Only a failed write to w is returned.
func (c *Client) followTo(ctx context.Context, w *controlWriter, req agentapi.ControlRequest) error {
	var (
		werr     error
		deflater *deflate.Pieces
	)
	if req.Deflate {
		deflater = &deflate.Pieces{}
	}
	data := writerFunc(func(p []byte) (int, error) {
		m := agentapi.ControlMessage{ID: req.ID, Data: p}
		if deflater != nil {
			m.Data, m.Deflated = deflater.Piece(p)
		}
		if werr = w.send(m); werr != nil {
			return 0, werr
		}
		return len(p), nil
	})
	var err error
	if req.Text != "" {
		err = c.FollowText(ctx, req.Job, req.Text, data)
	} else {
		err = c.FollowFrames(ctx, req.Job, req.Offset, req.Exit, data)
	}
	if werr != nil {
		return werr
	}
	end := agentapi.ControlMessage{ID: req.ID, End: true}
	if err != nil {
		end.Error, end.Code = err.Error(), ExitCode(err)
	}
	return w.send(end)
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// followSet holds the cancels of a channel's running follows.
type followSet struct {
	mu      sync.Mutex
	cancels map[uint64]context.CancelFunc
}

func (s *followSet) add(ctx context.Context, id uint64) context.Context {
	ctx, cancel := context.WithCancel(ctx)
	s.mu.Lock()
	s.cancels[id] = cancel
	s.mu.Unlock()
	return ctx
}

func (s *followSet) cancel(id uint64) {
	s.mu.Lock()
	cancel := s.cancels[id]
	delete(s.cancels, id)
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// controlWriter writes whole lines from many goroutines.
type controlWriter struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (w *controlWriter) send(m agentapi.ControlMessage) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.enc.Encode(m)
}
