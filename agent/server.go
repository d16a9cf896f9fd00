package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"shelljob.dev/shelljob/internal/agentapi"
)

// serve answers one connection.
func (d *Daemon) serve(conn net.Conn) {
	defer d.untrack(conn)
	defer conn.Close()
	bw := bufio.NewWriterSize(conn, 64<<10)
	req, rest, err := readRequest(bufio.NewReaderSize(conn, 64<<10))
	if err != nil {
		d.reply(bw, errorReply(err))
		return
	}
	log := d.log.WithValues("op", req.Op, "job", req.Job)
	if req.Op == agentapi.CmdAttach {
		err = d.serveAttach(&attachment{session: req.Session, conn: conn}, rest, bw, req.Job)
	} else {
		err = d.handle(rest, bw, req)
	}
	if err != nil {
		log.V(1).Info("Request ended", "error", err.Error())
	}
}

// readRequest decodes the request line, at most maxRequestBytes of it, and
// returns the rest of the stream after it.
func readRequest(r io.Reader) (request, io.Reader, error) {
	var req request
	lr := &io.LimitedReader{R: r, N: maxRequestBytes}
	dec := json.NewDecoder(lr)
	if err := dec.Decode(&req); err != nil {
		if lr.N <= 0 {
			return req, nil, fmt.Errorf("read request: too large: over %d bytes", maxRequestBytes)
		}
		return req, nil, fmt.Errorf("read request: %w", err)
	}
	return req, &afterLine{r: io.MultiReader(dec.Buffered(), r)}, nil
}

// afterLine is the stream after a request line: it drops the newline that
// ends the line. It reads nothing until it is read, as a client of events
// or follow sends nothing more.
type afterLine struct {
	r       io.Reader
	skipped bool
}

func (a *afterLine) Read(p []byte) (int, error) {
	for !a.skipped && len(p) > 0 {
		n, err := a.r.Read(p[:1])
		if n == 1 {
			a.skipped = true
			if p[0] != '\n' {
				return 1, nil
			}
		}
		if err != nil {
			return 0, err
		}
	}
	return a.r.Read(p)
}

func (d *Daemon) reply(bw *bufio.Writer, r reply) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	bw.Write(append(b, '\n'))
	return bw.Flush()
}

// clientGone returns a context that ends when the client closes its side.
func clientGone(r io.Reader) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, _ = io.Copy(io.Discard, r)
		cancel()
	}()
	return ctx, cancel
}

func (d *Daemon) handle(r io.Reader, bw *bufio.Writer, req request) error {
	switch req.Op {
	case agentapi.CmdPing:
		return d.reply(bw, reply{})

	case agentapi.CmdStart:
		if req.Start == nil {
			return d.reply(bw, errorReply(fmt.Errorf("start without a request")))
		}
		resp, err := d.Start(*req.Start)
		if err != nil {
			return d.reply(bw, errorReply(err))
		}
		return d.reply(bw, reply{Start: &resp})

	case agentapi.CmdSignal:
		resp, err := d.Signal(req.Job, req.Signal)
		if err != nil {
			return d.reply(bw, errorReply(err))
		}
		return d.reply(bw, reply{Signal: &resp})

	case agentapi.CmdDelivered:
		return d.reply(bw, errorReply(d.Delivered(req.Job)))

	case agentapi.CmdHangup:
		return d.reply(bw, errorReply(d.Hangup(req.Job, req.Session)))

	case agentapi.CmdEvents:
		if err := d.reply(bw, reply{}); err != nil {
			return err
		}
		ctx, cancel := clientGone(r)
		defer cancel()
		enc := json.NewEncoder(bw)
		return d.Events(ctx, func(e agentapi.Event) error { return enc.Encode(e) }, bw.Flush)

	case agentapi.CmdFollow:
		if req.Offset < 0 && req.Offset != agentapi.AwaitStart {
			return d.reply(bw, errorReply(fmt.Errorf("negative offset %d", req.Offset)))
		}
		ctx, cancel := clientGone(r)
		defer cancel()
		var j *job
		var err error
		if req.Offset == agentapi.AwaitStart {
			// Answered at once: the wait for the start is kept alive as
			// the output is.
			err = checkID(req.Job)
		} else {
			j, err = d.lookup(req.Job)
		}
		if err != nil {
			return d.reply(bw, errorReply(err))
		}
		if err := d.reply(bw, reply{}); err != nil {
			return err
		}
		fw := &liveFrames{fw: agentapi.NewFrameWriter(bw), bw: bw}
		kctx, stop := context.WithCancel(ctx)
		defer stop()
		go fw.keepAlive(kctx, d.opts.FollowKeepalive)
		if j == nil {
			if j, err = d.await(ctx, req.Job); err != nil {
				return err
			}
		}
		pos, err := j.spool.Follow(ctx, max(req.Offset, 0), fw)
		if err != nil {
			// Cut without an e frame: the reader follows again from pos.
			return err
		}
		// The output closes a moment before the exit is recorded; a reader
		// told the job ended finds its exit status.
		select {
		case <-j.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		stop()
		if req.Exit {
			d.mu.Lock()
			e := j.exitedEvent()
			d.mu.Unlock()
			if err := fw.exit(e); err != nil {
				return err
			}
		}
		return fw.end(pos)

	case agentapi.CmdPutFiles:
		if err := d.PutFiles(req.Job, r); err != nil {
			return d.reply(bw, errorReply(err))
		}
		return d.reply(bw, reply{})

	case agentapi.CmdGetFiles:
		if err := d.checkFiles(req.Job); err != nil {
			return d.reply(bw, errorReply(err))
		}
		if err := d.reply(bw, reply{}); err != nil {
			return err
		}
		if err := d.GetFiles(req.Job, req.Offset, bw); err != nil {
			return err
		}
		return bw.Flush()
	}
	return d.reply(bw, errorReply(fmt.Errorf("unknown operation %q", req.Op)))
}

// liveFrames writes a follow's frames, each sent as soon as it is made,
// and a keepalive frame every interval until the follow ends.
type liveFrames struct {
	mu sync.Mutex
	fw *agentapi.FrameWriter
	bw *bufio.Writer
}

func (f *liveFrames) send(frame func() error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := frame(); err != nil {
		return err
	}
	return f.bw.Flush()
}

func (f *liveFrames) Data(p []byte) error { return f.send(func() error { return f.fw.Data(p) }) }

func (f *liveFrames) Gap(n int64) error { return f.send(func() error { return f.fw.Gap(n) }) }

func (f *liveFrames) AfterStop(n int64) error {
	return f.send(func() error { return f.fw.AfterStop(n) })
}

func (f *liveFrames) exit(e agentapi.Event) error {
	return f.send(func() error { return f.fw.Exit(e) })
}

func (f *liveFrames) end(offset int64) error {
	return f.send(func() error { return f.fw.End(offset) })
}

// keepAlive sends a keepalive frame every interval until ctx ends or a
// send fails (the reader is gone, and the follow's own sends fail too).
func (f *liveFrames) keepAlive(ctx context.Context, interval time.Duration) {
	every(ctx, interval, func() bool {
		err := f.send(func() error {
			if ctx.Err() != nil {
				return ctx.Err() // nothing after the e frame
			}
			return f.fw.Keepalive()
		})
		return err == nil
	})
}
