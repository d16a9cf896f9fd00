package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"shelljob.dev/shelljob/internal/agentapi"
)

// maxControlLine bounds a control request: a start of a 64 KiB command,
// escaped, fits with room to spare.
const maxControlLine = 1 << 20

// Control serves the warm control channel of one exec: it writes the event
// stream's events to out as ControlMessages, and answers each
// ControlRequest read from in, concurrently, on the same out. It returns
// when in ends (the exec is gone), the event stream breaks, or ctx ends.
func (c *Client) Control(ctx context.Context, in io.Reader, out io.Writer) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	w := &controlWriter{enc: json.NewEncoder(out)}
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		err := c.Events(ctx, func(e agentapi.Event) {
			if err := w.send(agentapi.ControlMessage{Event: &e}); err != nil {
				cancel(err)
			}
		})
		cancel(err)
	})

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
	for {
		select {
		case <-ctx.Done():
			if err := context.Cause(ctx); !errors.Is(err, io.EOF) {
				return err
			}
			return nil
		case line, ok := <-lines:
			if !ok {
				continue // the cause is set
			}
			var req agentapi.ControlRequest
			if err := json.Unmarshal(line, &req); err != nil {
				return fmt.Errorf("control request %q: %w", line, err)
			}
			wg.Go(func() {
				if err := w.send(c.answer(ctx, req)); err != nil {
					cancel(err)
				}
			})
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
	default:
		err = fmt.Errorf("unknown control operation %q", req.Op)
	}
	if err != nil {
		m.Error, m.Code = err.Error(), ExitCode(err)
	}
	return m
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
