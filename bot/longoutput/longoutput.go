// Package longoutput keeps a job's long output, read again from the agent's
// spool for its final, in a temporary file, as the final shows it: invalid
// UTF-8 escaped, rendered when asked, NUL shown as \x00, and trimmed. The
// final then costs the bot a few pages of memory however long the output
// is: its .txt file is uploaded from the file, and its message shows the
// output's end, read back from the file.
package longoutput

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode"
	"unicode/utf8"

	"shelljob.dev/shelljob/internal/liveoutput"
	"shelljob.dev/shelljob/internal/termrender"
	"shelljob.dev/shelljob/internal/utf16text"
)

// nulShown is how a NUL shows in a final: Telegram keeps no NUL.
const nulShown = `\x00`

// An Output is a job's output kept in a file. Close removes the file.
type Output struct {
	f *os.File
	// start and end bound the text in f, without the white space around
	// it.
	start, end int64
	// runes and nuls count the characters and the NULs between them.
	runes, nuls int64
}

// Write keeps what fill writes, in a new file in dir (the system's
// temporary directory when empty). With render, output that holds a '\r',
// '\b' or ESC is rendered as a terminal shows it.
func Write(dir string, render bool, fill func(io.Writer) error) (*Output, error) {
	f, err := os.CreateTemp(dir, "shelljob-output-*")
	if err != nil {
		return nil, fmt.Errorf("keep a long output: %w", err)
	}
	// Unlinked at once, the file goes with the bot however it ends.
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, fmt.Errorf("keep a long output: %w", err)
	}
	o := &Output{f: f}
	if err := o.fill(render, fill); err != nil {
		f.Close()
		return nil, err
	}
	return o, nil
}

func (o *Output) fill(render bool, fill func(io.Writer) error) error {
	bw := bufio.NewWriterSize(o.f, 64<<10)
	t := &tracker{w: bw}
	c := &controls{w: t}
	e := &liveoutput.Escaper{W: c}
	if err := fill(e); err != nil {
		return err
	}
	if err := e.Close(); err != nil {
		return fmt.Errorf("keep a long output: %w", err)
	}
	if render && c.seen {
		// The renderer needs the whole text; it holds the text as shown,
		// which a redrawing program keeps far shorter than what it wrote.
		if err := bw.Flush(); err != nil {
			return fmt.Errorf("keep a long output: %w", err)
		}
		var r termrender.Renderer
		if _, err := io.Copy(&r, io.NewSectionReader(o.f, 0, t.size)); err != nil {
			return fmt.Errorf("render a long output: %w", err)
		}
		if _, err := o.f.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("render a long output: %w", err)
		}
		if err := o.f.Truncate(0); err != nil {
			return fmt.Errorf("render a long output: %w", err)
		}
		bw.Reset(o.f)
		t = &tracker{w: bw}
		if _, err := io.WriteString(t, r.String()); err != nil {
			return fmt.Errorf("keep a long output: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("keep a long output: %w", err)
	}
	o.start, o.end = t.start, t.end
	o.runes = t.runesToEnd - t.runesToStart
	o.nuls = t.nulsToEnd
	return nil
}

// Close removes the file.
func (o *Output) Close() error { return o.f.Close() }

// Empty tells whether the output is only white space, or nothing.
func (o *Output) Empty() bool { return o.end <= o.start }

// Size is the output's length in bytes, as the final shows it.
func (o *Output) Size() int64 { return o.end - o.start + int64(len(nulShown)-1)*o.nuls }

// Runes is the output's length in characters, as the final shows it.
func (o *Output) Runes() int64 { return o.runes + int64(len(nulShown)-1)*o.nuls }

// Reader reads the output as the final shows it, from its start.
func (o *Output) Reader() io.Reader {
	r := io.Reader(io.NewSectionReader(o.f, o.start, o.end-o.start))
	if o.nuls > 0 {
		r = &nulReader{r: r}
	}
	return r
}

// String returns the whole output, for one short enough to hold.
func (o *Output) String() (string, error) {
	var sb strings.Builder
	sb.Grow(int(o.Size()))
	if _, err := io.Copy(&sb, o.Reader()); err != nil {
		return "", fmt.Errorf("read a long output back: %w", err)
	}
	return sb.String(), nil
}

// Tail returns the longest end of the output that has at most units UTF-16
// units.
func (o *Output) Tail(units int) (string, error) {
	// A character takes at least one unit and at most four bytes.
	n := min(o.end-o.start, int64(units)*utf8.UTFMax)
	p := make([]byte, n)
	if _, err := o.f.ReadAt(p, o.end-n); err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read a long output's end: %w", err)
	}
	for len(p) > 0 && !utf8.RuneStart(p[0]) {
		p = p[1:]
	}
	s := strings.ReplaceAll(string(p), "\x00", nulShown)
	return utf16text.Tail(s, units), nil
}

// controls notes whether the text written through it holds a byte that
// rendering acts on.
type controls struct {
	w    io.Writer
	seen bool
}

func (c *controls) Write(p []byte) (int, error) {
	if !c.seen && bytes.ContainsAny(p, "\r\b\x1b") {
		c.seen = true
	}
	return c.w.Write(p)
}

// tracker writes valid UTF-8 through, and finds where the text starts and
// ends without the white space around it, as strings.TrimSpace would cut
// it. A character cut between writes waits for the next.
type tracker struct {
	w    io.Writer
	size int64
	// started: a character that is not white space was seen.
	started         bool
	start, end      int64
	runes           int64
	runesToStart    int64
	runesToEnd      int64
	nulsToEnd, nuls int64
	held            [utf8.UTFMax]byte
	nheld           int
}

func (t *tracker) Write(p []byte) (int, error) {
	n, err := t.w.Write(p)
	if err != nil {
		return n, err
	}
	q := p
	if t.nheld > 0 {
		k := min(len(q), utf8.UTFMax-t.nheld)
		buf := append(t.held[:t.nheld:t.nheld], q[:k]...)
		if !utf8.FullRune(buf) {
			t.nheld = copy(t.held[:], buf)
			return n, nil
		}
		r, size := utf8.DecodeRune(buf)
		t.see(r, size)
		q = q[size-t.nheld:]
		t.nheld = 0
	}
	for len(q) > 0 {
		if !utf8.FullRune(q) {
			t.nheld = copy(t.held[:], q)
			break
		}
		r, size := utf8.DecodeRune(q)
		t.see(r, size)
		q = q[size:]
	}
	return n, nil
}

// see counts the character r, size bytes long, that starts at t.size.
func (t *tracker) see(r rune, size int) {
	t.runes++
	if r == 0 {
		t.nuls++
	}
	if !unicode.IsSpace(r) {
		if !t.started {
			t.started, t.start, t.runesToStart = true, t.size, t.runes-1
		}
		t.end, t.runesToEnd, t.nulsToEnd = t.size+int64(size), t.runes, t.nuls
	}
	t.size += int64(size)
}

// nulReader shows each NUL as \x00.
type nulReader struct {
	r       io.Reader
	raw     []byte
	pending []byte
}

func (n *nulReader) Read(p []byte) (int, error) {
	if len(n.pending) == 0 {
		if n.raw == nil {
			n.raw = make([]byte, 32<<10)
		}
		k, err := n.r.Read(n.raw)
		if k == 0 {
			return 0, err
		}
		n.pending = bytes.ReplaceAll(n.raw[:k], []byte{0}, []byte(nulShown))
	}
	k := copy(p, n.pending)
	n.pending = n.pending[k:]
	return k, nil
}
