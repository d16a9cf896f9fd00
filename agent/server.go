package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"

	"shelljob.dev/shelljob/internal/agentapi"
)

// serve answers one connection.
func (d *Daemon) serve(conn net.Conn) {
	defer d.untrack(conn)
	defer conn.Close()
	br := bufio.NewReaderSize(conn, 64<<10)
	bw := bufio.NewWriterSize(conn, 64<<10)
	req, err := readRequest(br)
	if err != nil {
		d.reply(bw, errorReply(err))
		return
	}
	log := d.log.WithValues("op", req.Op, "job", req.Job)
	if err := d.handle(br, bw, req); err != nil {
		log.V(1).Info("request ended", "error", err.Error())
	}
}

func readRequest(br *bufio.Reader) (request, error) {
	var req request
	line, err := br.ReadSlice('\n')
	for err == bufio.ErrBufferFull && len(line) < maxRequestBytes {
		var more []byte
		more, err = br.ReadSlice('\n')
		line = append(line, more...)
	}
	if err != nil {
		return req, fmt.Errorf("read request: %w", err)
	}
	if err := json.Unmarshal(line, &req); err != nil {
		return req, fmt.Errorf("read request: %w", err)
	}
	return req, nil
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
func clientGone(br *bufio.Reader) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_, _ = io.Copy(io.Discard, br)
		cancel()
	}()
	return ctx, cancel
}

func (d *Daemon) handle(br *bufio.Reader, bw *bufio.Writer, req request) error {
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

	case agentapi.CmdEvents:
		if err := d.reply(bw, reply{}); err != nil {
			return err
		}
		ctx, cancel := clientGone(br)
		defer cancel()
		enc := json.NewEncoder(bw)
		return d.Events(ctx, func(e agentapi.Event) error { return enc.Encode(e) }, bw.Flush)

	case agentapi.CmdFollow:
		if req.Offset < 0 {
			return d.reply(bw, errorReply(fmt.Errorf("negative offset %d", req.Offset)))
		}
		j, err := d.lookup(req.Job)
		if err != nil {
			return d.reply(bw, errorReply(err))
		}
		if err := d.reply(bw, reply{}); err != nil {
			return err
		}
		ctx, cancel := clientGone(br)
		defer cancel()
		fw := agentapi.NewFrameWriter(bw)
		pos, err := j.spool.Follow(ctx, req.Offset, flushing{fw, bw})
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
		if err := fw.End(pos); err != nil {
			return err
		}
		return bw.Flush()

	case agentapi.CmdPutFiles:
		if err := d.PutFiles(req.Job, br); err != nil {
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
		if err := d.GetFiles(req.Job, bw); err != nil {
			return err
		}
		return bw.Flush()
	}
	return d.reply(bw, errorReply(fmt.Errorf("unknown operation %q", req.Op)))
}

// flushing sends each frame as soon as it is made.
type flushing struct {
	fw *agentapi.FrameWriter
	bw *bufio.Writer
}

func (f flushing) Data(p []byte) error {
	if err := f.fw.Data(p); err != nil {
		return err
	}
	return f.bw.Flush()
}

func (f flushing) Gap(n int64) error {
	if err := f.fw.Gap(n); err != nil {
		return err
	}
	return f.bw.Flush()
}

func (f flushing) AfterStop(n int64) error {
	if err := f.fw.AfterStop(n); err != nil {
		return err
	}
	return f.bw.Flush()
}
