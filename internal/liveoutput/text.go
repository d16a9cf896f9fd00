package liveoutput

import (
	"io"
	"strings"
	"unicode/utf8"

	"shelljob.dev/shelljob/internal/termrender"
)

func isContinuation(c byte) bool { return c&0xC0 == 0x80 }

// skipContinuations returns p without the end of a character cut off at its
// start.
func skipContinuations(p []byte) []byte {
	k := 0
	for k < min(utf8.UTFMax-1, len(p)) && isContinuation(p[k]) {
		k++
	}
	return p[k:]
}

// cutCharLen returns how many bytes at the end of p are the start of a
// UTF-8 character that is not whole.
func cutCharLen(p []byte) int {
	for k := 1; k <= min(utf8.UTFMax-1, len(p)); k++ {
		c := p[len(p)-k]
		if isContinuation(c) {
			continue
		}
		if c >= 0xC0 && !utf8.FullRune(p[len(p)-k:]) {
			return k
		}
		return 0
	}
	return 0
}

// invalidLen returns how many bytes at the start of p, which do not start
// a UTF-8 character, are one error as Unicode's "maximal subpart" practice
// counts them (so does Python's decoder), and whether they are the start of
// a character that p cuts off.
func invalidLen(p []byte) (n int, cut bool) {
	var size int
	lo, hi := byte(0x80), byte(0xBF)
	switch c := p[0]; {
	case c >= 0xC2 && c <= 0xDF:
		size = 2
	case c == 0xE0:
		size, lo = 3, 0xA0
	case c >= 0xE1 && c <= 0xEF:
		size = 3
		if c == 0xED {
			hi = 0x9F
		}
	case c == 0xF0:
		size, lo = 4, 0x90
	case c >= 0xF1 && c <= 0xF3:
		size = 4
	case c == 0xF4:
		size, hi = 4, 0x8F
	default:
		return 1, false
	}
	for n = 1; n < size; n++ {
		if n == len(p) {
			return n, true
		}
		if c := p[n]; c < lo || c > hi {
			return n, false
		}
		lo, hi = 0x80, 0xBF
	}
	return n, false
}

// decodeReplace decodes p as Python's incremental UTF-8 decoder does with
// errors="replace" before the end: each error is one U+FFFD, and a
// character cut off at the end is left out.
func decodeReplace(p []byte) string {
	if utf8.Valid(p) {
		return string(p)
	}
	var sb strings.Builder
	sb.Grow(len(p) + 16)
	for len(p) > 0 {
		c, size := utf8.DecodeRune(p)
		if c != utf8.RuneError || size > 1 {
			sb.Write(p[:size])
			p = p[size:]
			continue
		}
		n, cut := invalidLen(p)
		if cut {
			break
		}
		sb.WriteRune(utf8.RuneError)
		p = p[n:]
	}
	return sb.String()
}

// DecodeEscape decodes p as Python does with errors="backslashreplace": each
// byte that is not UTF-8 becomes a \xNN escape.
func DecodeEscape(p []byte) string {
	if utf8.Valid(p) {
		return string(p)
	}
	const hex = "0123456789abcdef"
	var sb strings.Builder
	sb.Grow(len(p) + 16)
	for len(p) > 0 {
		c, size := utf8.DecodeRune(p)
		if c != utf8.RuneError || size > 1 {
			sb.Write(p[:size])
		} else {
			sb.Write([]byte{'\\', 'x', hex[p[0]>>4], hex[p[0]&0xF]})
		}
		p = p[size:]
	}
	return sb.String()
}

// An Escaper writes to W what DecodeEscape makes of all that is written to
// it, piece by piece: pieces may cut a character anywhere. Close writes
// what a character left unfinished at the end becomes.
type Escaper struct {
	W    io.Writer
	held []byte
}

// Write escapes p; a character that p leaves unfinished waits for the
// next write.
func (e *Escaper) Write(p []byte) (int, error) {
	n := len(p)
	if len(e.held) > 0 {
		joined := append(e.held, p[:min(len(p), utf8.UTFMax)]...)
		if cutCharLen(joined) == len(joined) {
			// Still unfinished: p was too short to end it.
			e.held = joined
			return n, nil
		}
		// Decode the held bytes as if they had come with p: up to the end
		// of the character that holds the last of them.
		i := 0
		for i < len(e.held) {
			_, size := utf8.DecodeRune(joined[i:])
			i += size
		}
		if err := e.put(joined[:i]); err != nil {
			return 0, err
		}
		p = p[i-len(e.held):]
		e.held = joined[:0]
	}
	cut := cutCharLen(p)
	if err := e.put(p[:len(p)-cut]); err != nil {
		return 0, err
	}
	e.held = append(e.held, p[len(p)-cut:]...)
	return n, nil
}

// Close writes the unfinished character held from the last write, escaped.
func (e *Escaper) Close() error {
	err := e.put(e.held)
	e.held = e.held[:0]
	return err
}

func (e *Escaper) put(p []byte) error {
	if len(p) == 0 {
		return nil
	}
	_, err := io.WriteString(e.W, DecodeEscape(p))
	return err
}

// NewFinalWriter returns a writer that writes to w what a final shows of
// the output written to it, in any pieces: each byte that is not UTF-8 as
// a \xNN escape (Escaper) and, with render, the text rendered as a
// termrender.Stream renders it, whose held lines are bounded. Its Close
// writes the end.
func NewFinalWriter(w io.Writer, render bool) io.WriteCloser {
	if !render {
		return &Escaper{W: w}
	}
	s := termrender.NewStream(w, termrender.DefaultReach)
	return finalWriter{Escaper: &Escaper{W: s}, stream: s}
}

type finalWriter struct {
	*Escaper
	stream *termrender.Stream
}

func (f finalWriter) Close() error {
	if err := f.Escaper.Close(); err != nil {
		return err
	}
	return f.stream.Close()
}
