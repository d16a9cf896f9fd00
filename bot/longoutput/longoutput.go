// Package longoutput streams a job's long output from the agent's spool
// into its final, as the final shows it: NUL shown as \x00, and trimmed,
// from the final text the agent makes of its spool (escaped, and rendered
// when asked: agentapi.TextMagic). The text is read twice: once to measure
// it and keep its end, which the final's message shows, and once more as
// its .txt file is uploaded. The bot then holds a few pages of a final
// however long, binary or redrawn its output is, and writes nothing to
// disk.
package longoutput

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"

	"shelljob.dev/shelljob/internal/liveoutput"
	"shelljob.dev/shelljob/internal/utf16text"
)

// TailBytes is how much of the output's end an Output keeps: Tail gives at
// most a quarter as many UTF-16 units, as a character takes at most four
// bytes.
const TailBytes = 16 << 10

// nulShown is how a NUL shows in a final: Telegram keeps no NUL.
const nulShown = `\x00`

// A Source writes the whole final text to w, from its start, each time it
// is called, and the same text each time: the final text of a job that
// ended. What is not UTF-8 in it is escaped again.
type Source func(w io.Writer) error

// An Output is a job's output, measured.
type Output struct {
	src Source
	// start and end bound the text without the white space around it.
	start, end int64
	// runes and nuls count the characters and the NULs between them.
	runes, nuls int64
	tail        []byte
}

// Measure reads src once and measures what a final shows of it.
func Measure(src Source) (*Output, error) {
	t := &tracker{}
	if err := escaped(src, t); err != nil {
		return nil, err
	}
	o := &Output{src: src}
	o.start, o.end = t.start, t.end
	o.runes = t.runesToEnd - t.runesToStart
	o.nuls = t.nulsToEnd
	o.tail = t.tailBytes()
	return o, nil
}

// escaped writes what src writes to w, with invalid UTF-8 escaped.
func escaped(src Source, w io.Writer) error {
	e := &liveoutput.Escaper{W: w}
	if err := src(e); err != nil {
		return err
	}
	return e.Close()
}

// Empty tells whether the output is only white space, or nothing.
func (o *Output) Empty() bool { return o.end <= o.start }

// Size is the output's length in bytes, as the final shows it.
func (o *Output) Size() int64 { return o.end - o.start + int64(len(nulShown)-1)*o.nuls }

// Runes is the output's length in characters, as the final shows it.
func (o *Output) Runes() int64 { return o.runes + int64(len(nulShown)-1)*o.nuls }

// Tail returns the longest end of the output that has at most units UTF-16
// units, up to TailBytes/4 units.
func (o *Output) Tail(units int) string {
	p := o.tail
	for len(p) > 0 && !utf8.RuneStart(p[0]) {
		p = p[1:]
	}
	return utf16text.Tail(strings.ReplaceAll(string(p), "\x00", nulShown), units)
}

// Reader reads the output as the final shows it, from its start, reading
// the spool again as it goes. Its Close ends that read.
func (o *Output) Reader() io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		w := &section{w: &nulWriter{w: pw}, skip: o.start, left: o.end - o.start}
		err := escaped(o.src, w)
		switch {
		case w.left == 0:
			// The text ends here; the read was cut at its end, or went
			// through the white space after it.
			err = nil
		case err == nil:
			err = fmt.Errorf("the output's second read ended %d bytes early", w.left)
		}
		pw.CloseWithError(err)
	}()
	return pr
}

// String returns the whole output, for one short enough to hold.
func (o *Output) String() (string, error) {
	r := o.Reader()
	defer r.Close()
	var sb strings.Builder
	sb.Grow(int(o.Size()))
	if _, err := io.Copy(&sb, r); err != nil {
		return "", fmt.Errorf("read the output again: %w", err)
	}
	return sb.String(), nil
}

// errSectionEnd ends a read that reached the end of the text: what follows
// is white space.
var errSectionEnd = errors.New("past the end of the text")

// section writes to w the bytes from skip on, left of them.
type section struct {
	w          io.Writer
	skip, left int64
}

func (s *section) Write(p []byte) (int, error) {
	n := len(p)
	k := min(int64(len(p)), s.skip)
	p, s.skip = p[k:], s.skip-k
	if int64(len(p)) > s.left {
		p = p[:s.left]
	}
	if len(p) > 0 {
		if _, err := s.w.Write(p); err != nil {
			return 0, err
		}
		s.left -= int64(len(p))
	}
	if s.left == 0 {
		return n, errSectionEnd
	}
	return n, nil
}

// nulWriter shows each NUL as \x00.
type nulWriter struct{ w io.Writer }

func (n *nulWriter) Write(p []byte) (int, error) {
	if bytes.IndexByte(p, 0) < 0 {
		return n.w.Write(p)
	}
	if _, err := n.w.Write(bytes.ReplaceAll(p, []byte{0}, []byte(nulShown))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// tracker finds where the text written to it starts and ends without the
// white space around it, as strings.TrimSpace would cut it, and keeps the
// last TailBytes of it up to that end. Each write holds whole characters:
// the Escaper's output.
type tracker struct {
	size int64
	// started: a character that is not white space was seen.
	started                  bool
	start, end               int64
	runes, nuls              int64
	runesToStart, runesToEnd int64
	nulsToEnd                int64
	// tail ends at end; pending is the white space since, its last
	// TailBytes.
	tail, pending []byte
}

func (t *tracker) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		r, size := rune(p[0]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRune(p)
		}
		t.see(r, p[:size])
		p = p[size:]
	}
	return n, nil
}

// see counts the character r, whose bytes are p, that starts at t.size.
func (t *tracker) see(r rune, p []byte) {
	t.runes++
	if r == 0 {
		t.nuls++
	}
	switch {
	case !isSpace(r):
		if !t.started {
			t.started, t.start, t.runesToStart = true, t.size, t.runes-1
		}
		t.tail = keepLast(keepLast(t.tail, t.pending), p)
		t.pending = t.pending[:0]
		t.end, t.runesToEnd, t.nulsToEnd = t.size+int64(len(p)), t.runes, t.nuls
	case t.started:
		t.pending = keepLast(t.pending, p)
	}
	t.size += int64(len(p))
}

func (t *tracker) tailBytes() []byte {
	return t.tail[max(0, len(t.tail)-TailBytes):]
}

// keepLast appends p to b and keeps at least the last TailBytes.
func keepLast(b, p []byte) []byte {
	b = append(b, p...)
	if len(b) > 2*TailBytes {
		b = b[:copy(b, b[len(b)-TailBytes:])]
	}
	return b
}

func isSpace(r rune) bool {
	if r < utf8.RuneSelf {
		return r == ' ' || uint32(r-'\t') < 5 // '\t', '\n', '\v', '\f', '\r'
	}
	return unicode.IsSpace(r)
}
