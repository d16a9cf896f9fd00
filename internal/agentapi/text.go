package agentapi

import (
	"bufio"
	"io"

	"shelljob.dev/shelljob/internal/liveoutput"
)

// TextMagic opens a final text stream, which follow writes with FlagText:
// the job's output from its start as its final shows it
// (liveoutput.NewFinalWriter), in the frames of a follow stream. Its data
// frames carry the text, the not-kept lines in place; keepalives come as in
// a follow; the e frame gives the text's length. It has no g or s frames. The text is made where the output lives, so that a long or
// redrawn output costs its own worker, not its reader.
const TextMagic = "shelljob-text 1\n"

// FlagText makes follow write the final text stream of the job, from its
// start, in a TextMode; --offset must be 0.
const FlagText = "--text"

// TextMode is how a final text stream shows the output.
type TextMode string

const (
	// TextEscaped: each byte that is not UTF-8 as a \xNN escape.
	TextEscaped TextMode = "escaped"
	// TextRendered: escaped, then rendered as a terminal shows it, with a
	// cursor-up that reaches termrender.DefaultReach lines above the last.
	TextRendered TextMode = "rendered"
)

// TextModeOf is TextRendered with render, TextEscaped without.
func TextModeOf(render bool) TextMode {
	if render {
		return TextRendered
	}
	return TextEscaped
}

// Valid tells whether m is one of the modes.
func (m TextMode) Valid() bool { return m == TextEscaped || m == TextRendered }

// TextWriter makes a follow into a final text stream: it is the FollowSink
// of the follow, and writes the frames of the text to its writer.
type TextWriter struct {
	frames *FrameWriter
	data   *dataFrames
	text   io.WriteCloser
}

// NewTextFrameWriter returns a FrameWriter of a final text stream, whose
// data frames carry text: TextMagic goes out with the first frame.
func NewTextFrameWriter(w io.Writer) *FrameWriter { return &FrameWriter{w: w, magic: TextMagic} }

// NewTextWriter returns a TextWriter that writes the final text stream, in
// mode, to w.
func NewTextWriter(w io.Writer, mode TextMode) *TextWriter {
	f := NewTextFrameWriter(w)
	d := &dataFrames{f: f}
	return &TextWriter{frames: f, data: d, text: liveoutput.NewFinalWriter(d, mode == TextRendered)}
}

// Data implements FollowSink.
func (t *TextWriter) Data(p []byte) error { _, err := t.text.Write(p); return err }

// Gap implements FollowSink.
func (t *TextWriter) Gap(n int64) error { _, err := io.WriteString(t.text, GapLine(n)); return err }

// AfterStop implements FollowSink.
func (t *TextWriter) AfterStop(n int64) error {
	_, err := io.WriteString(t.text, AfterStopLine(n))
	return err
}

// Keepalive writes a keepalive frame.
func (t *TextWriter) Keepalive() error { return t.frames.Keepalive() }

// End writes the rest of the text and the last frame, once the output
// ended.
func (t *TextWriter) End() error {
	if err := t.text.Close(); err != nil {
		return err
	}
	return t.frames.End(t.data.n)
}

// dataFrames writes each write as a data frame, and counts them.
type dataFrames struct {
	f *FrameWriter
	n int64
}

func (d *dataFrames) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if err := d.f.Data(p); err != nil {
		return 0, err
	}
	d.n += int64(len(p))
	return len(p), nil
}

// TextOfFollow writes to w the final text, in mode, of the output follow
// writes from its start: for an agent that cannot write its text stream.
func TextOfFollow(follow func(w io.Writer) error, mode TextMode, w io.Writer) error {
	text := liveoutput.NewFinalWriter(w, mode == TextRendered)
	if err := follow(text); err != nil {
		return err
	}
	return text.Close()
}

// ReadText reads a final text stream in mode and writes the text to w. It
// returns nil once the stream's e frame came. A follow stream (from an
// agent older than FlagText, which ignores ControlRequest.Text) is made
// into the same text here.
func ReadText(r io.Reader, mode TextMode, w io.Writer) error {
	br := bufio.NewReaderSize(r, 64<<10)
	if head, _ := br.Peek(len(FollowMagic)); string(head) == FollowMagic {
		return TextOfFollow(func(w io.Writer) error {
			_, err := ReadFollow(br, 0, w)
			return err
		}, mode, w)
	}
	_, err := decodeFrames(br, TextMagic, 0, TextSink{W: w}, nil)
	return err
}
