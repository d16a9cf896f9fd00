package agentapi

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"shelljob.dev/shelljob/internal/idle"
)

// FollowMagic opens a framed follow stream. Frames follow it, each a header
// line and, for data, its bytes:
//
//	d N\n  then N bytes of output
//	g N\n  N bytes of the middle of the output were not kept
//	s N\n  N bytes written after the stop were not kept
//	x N\n  then N bytes: the job's exit, its EventExited as JSON
//	e O\n  the output is closed at offset O: the job ended
//
// Every frame but x and e moves the offset by N. A stream that breaks
// before e is cut short, and the reader follows again from the offset it
// reached.
//
// The x frame comes just before e, and only to a reader that asked for it
// (ControlRequest.Exit): a reader of version 1 that did not ask never
// sees it, so it needs no new version. A reader that asked learns how the
// command ended with its output's end, before any status says so; an
// older agent sends no x frame, and the reader asks the status then.
//
// An empty data frame, "d 0", is a keepalive: the agent sends one every
// FollowKeepalive while the follow lasts, the magic first if it is the
// first frame, so that a reader tells a silent command from a dead stream
// (Client.Follow's idle deadline). Every reader of version 1 already drops
// it: the frame needs no new version.
const FollowMagic = "shelljob-follow 1\n"

// FollowKeepalive is how often the agent sends a follow's keepalive frame,
// output or not, from the moment it answers the follow, its wait for the
// start (AwaitStart) included. A reader that got no byte for a few of
// them takes the stream for dead.
const FollowKeepalive = 10 * time.Second

// DefaultStreamIdle is how long a client's follow, put-files or get-files
// stream may move no byte while it waits on the agent before it is cut
// with ErrStreamIdle: three follow keepalives. A user who watches a job's
// output learns within half a minute that its worker stopped answering,
// while a keepalive late by a network hiccup cuts nothing. A file
// transfer moves bytes all along: half a minute without one is a hang too.
const DefaultStreamIdle = 3 * FollowKeepalive

// GapLine stands for n bytes of the middle of an output that were not kept.
// It is the line internal/liveoutput puts there too.
func GapLine(n int64) string { return fmt.Sprintf("\n[… %d bytes not kept …]\n", n) }

// AfterStopLine stands for the n bytes written after a stop beyond what was
// kept.
func AfterStopLine(n int64) string {
	return fmt.Sprintf("\n[… %d bytes written after the stop not kept …]\n", n)
}

// FollowSink receives what a follow finds, in order.
type FollowSink interface {
	// Data is output that was kept.
	Data(p []byte) error
	// Gap stands for n bytes of the middle that were not kept.
	Gap(n int64) error
	// AfterStop stands for n bytes written after the stop that were not kept.
	AfterStop(n int64) error
}

// ExitSink hears the x frame: the job's exit, just before the output's
// end. A follow's writer or FollowSink that is one gets it.
type ExitSink interface {
	Exit(e Event) error
}

// ExitWriter is a follow's writer that keeps the job's exit: an ExitSink.
type ExitWriter struct {
	io.Writer
	// Exited is the job's exit, once the follow told it.
	Exited *Event
}

// Exit implements ExitSink.
func (w *ExitWriter) Exit(e Event) error {
	w.Exited = &e
	return nil
}

// maxExitFrame bounds an x frame: an exit event is a few hundred bytes.
const maxExitFrame = 64 << 10

// FrameWriter writes a framed follow stream.
type FrameWriter struct {
	w       io.Writer
	magic   string
	started bool
}

// NewFrameWriter returns a FrameWriter that writes to w. FollowMagic goes
// out with the first frame.
func NewFrameWriter(w io.Writer) *FrameWriter { return &FrameWriter{w: w, magic: FollowMagic} }

func (f *FrameWriter) header(kind byte, n int64) error {
	var b []byte
	if !f.started {
		b = append(b, f.magic...)
		f.started = true
	}
	b = append(b, kind, ' ')
	b = strconv.AppendInt(b, n, 10)
	b = append(b, '\n')
	_, err := f.w.Write(b)
	return err
}

// Data implements FollowSink.
func (f *FrameWriter) Data(p []byte) error {
	if err := f.header('d', int64(len(p))); err != nil {
		return err
	}
	_, err := f.w.Write(p)
	return err
}

// Gap implements FollowSink.
func (f *FrameWriter) Gap(n int64) error { return f.header('g', n) }

// AfterStop implements FollowSink.
func (f *FrameWriter) AfterStop(n int64) error { return f.header('s', n) }

// Keepalive writes the empty data frame that carries nothing but the
// stream's life.
func (f *FrameWriter) Keepalive() error { return f.header('d', 0) }

// Exit writes the x frame of the job's exit e (EventExited).
func (f *FrameWriter) Exit(e Event) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if err := f.header('x', int64(len(b))); err != nil {
		return err
	}
	_, err = f.w.Write(b)
	return err
}

// End writes the last frame: the output is closed at offset.
func (f *FrameWriter) End(offset int64) error { return f.header('e', offset) }

// TextSink writes what a follow finds as text: the output, with GapLine and
// AfterStopLine in place of what was not kept.
type TextSink struct{ W io.Writer }

// Data implements FollowSink.
func (t TextSink) Data(p []byte) error { _, err := t.W.Write(p); return err }

// Gap implements FollowSink.
func (t TextSink) Gap(n int64) error { _, err := io.WriteString(t.W, GapLine(n)); return err }

// AfterStop implements FollowSink.
func (t TextSink) AfterStop(n int64) error {
	_, err := io.WriteString(t.W, AfterStopLine(n))
	return err
}

// Exit implements ExitSink: W hears the exit if it is an ExitSink.
func (t TextSink) Exit(e Event) error { return exitTo(t.W, e) }

// exitTo hands e to w if w is an ExitSink, and drops it otherwise.
func exitTo(w any, e Event) error {
	if x, ok := w.(ExitSink); ok {
		return x.Exit(e)
	}
	return nil
}

// NearSink is sink under a stream's idle watch: the time its calls take,
// the near end's work, does not count (idle.Watch.Near).
func NearSink(watch *idle.Watch, sink FollowSink) FollowSink { return nearSink{watch, sink} }

type nearSink struct {
	watch *idle.Watch
	sink  FollowSink
}

func (s nearSink) Data(p []byte) error {
	return s.watch.Near(func() error { return s.sink.Data(p) })
}

func (s nearSink) Gap(n int64) error {
	return s.watch.Near(func() error { return s.sink.Gap(n) })
}

func (s nearSink) AfterStop(n int64) error {
	return s.watch.Near(func() error { return s.sink.AfterStop(n) })
}

func (s nearSink) Exit(e Event) error {
	return s.watch.Near(func() error { return exitTo(s.sink, e) })
}

// ReadFollow reads a framed follow stream that starts at offset, writes it
// to SinkOf(w), and returns the offset reached. It returns nil once the e
// frame came, and io.ErrUnexpectedEOF for a stream cut before.
func ReadFollow(r io.Reader, offset int64, w io.Writer) (int64, error) {
	return DecodeFollow(r, offset, SinkOf(w), nil)
}

// SinkOf is where a follow written to w goes: w itself when it is a
// FollowSink, which so gets the frames (a reader that passes them on, as
// the stream API does, or that counts offsets), else TextSink{W: w}.
func SinkOf(w io.Writer) FollowSink {
	if s, ok := w.(FollowSink); ok {
		return s
	}
	return TextSink{W: w}
}

// DecodeFollow is ReadFollow into sink. keepalive, when set, is called for
// each keepalive frame, which sink never sees.
func DecodeFollow(r io.Reader, offset int64, sink FollowSink, keepalive func() error) (int64, error) {
	return decodeFrames(r, FollowMagic, offset, sink, keepalive)
}

// decodeFrames reads a framed stream that starts with magic.
func decodeFrames(r io.Reader, magic string, offset int64, sink FollowSink, keepalive func() error) (int64, error) {
	offset = max(offset, 0) // AwaitStart follows from 0
	br := bufio.NewReaderSize(r, 64<<10)
	got := make([]byte, len(magic))
	if _, err := io.ReadFull(br, got); err != nil {
		return offset, unexpected(err)
	}
	if string(got) != magic {
		return offset, fmt.Errorf("stream starts with %q, not %q: %w", got, magic, ErrProtocol)
	}
	data := make([]byte, 32<<10)
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return offset, unexpected(err)
		}
		if len(line) < 4 || line[1] != ' ' {
			return offset, fmt.Errorf("bad follow frame %q: %w", line, ErrProtocol)
		}
		n, err := strconv.ParseInt(string(line[2:len(line)-1]), 10, 64)
		if err != nil || n < 0 {
			return offset, fmt.Errorf("bad follow frame %q: %w", line, ErrProtocol)
		}
		switch line[0] {
		case 'd':
			if n == 0 && keepalive != nil {
				if err := keepalive(); err != nil {
					return offset, err
				}
			}
			for n > 0 {
				k, err := io.ReadFull(br, data[:min(n, int64(len(data)))])
				if k > 0 {
					if err := sink.Data(data[:k]); err != nil {
						return offset, err
					}
				}
				offset += int64(k)
				n -= int64(k)
				if err != nil {
					return offset, unexpected(err)
				}
			}
		case 'g':
			if err := sink.Gap(n); err != nil {
				return offset, err
			}
			offset += n
		case 's':
			if err := sink.AfterStop(n); err != nil {
				return offset, err
			}
			offset += n
		case 'x':
			if n > maxExitFrame {
				return offset, fmt.Errorf("exit frame of %d bytes: %w", n, ErrProtocol)
			}
			b := make([]byte, n)
			if _, err := io.ReadFull(br, b); err != nil {
				return offset, unexpected(err)
			}
			var e Event
			if err := json.Unmarshal(b, &e); err != nil || e.Type != EventExited {
				return offset, fmt.Errorf("bad exit frame %q: %w", b, ErrProtocol)
			}
			if err := exitTo(sink, e); err != nil {
				return offset, err
			}
		case 'e':
			if n != offset {
				return offset, fmt.Errorf("follow ended at %d, reader at %d: %w", n, offset, ErrProtocol)
			}
			return offset, nil
		default:
			return offset, fmt.Errorf("bad follow frame %q: %w", line, ErrProtocol)
		}
	}
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
