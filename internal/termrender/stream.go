package termrender

import (
	"io"
	"slices"
)

// DefaultReach is how many lines above the last one a Stream's cursor-up
// reaches: far more than a multi-bar progress display redraws, few enough
// that the lines a Stream holds stay small.
const DefaultReach = 1000

// A Stream renders output written to it as a Renderer does, and writes each
// line to its writer once no later output can change it, so that what it
// holds is bounded by its reach rather than by the output's length.
//
// Only the cursor-up differs from Render: it moves at most to the line Reach
// lines above the last line, not to the first one. An output whose cursor-ups
// never go further than that renders exactly as Render renders it; how the
// output is split into writes never changes the result.
//
// A Stream is not safe for concurrent use.
type Stream struct {
	w   io.Writer
	r   Renderer
	err error
}

// NewStream returns a Stream that writes the rendered text to w, whose
// cursor-up reaches reach lines above the last line (DefaultReach when
// reach is not positive).
func NewStream(w io.Writer, reach int) *Stream {
	if reach <= 0 {
		reach = DefaultReach
	}
	s := &Stream{w: w}
	s.r.reach = reach
	return s
}

// Write renders p, and writes to the Stream's writer the lines that are
// final. It fails only when that writer does, and then keeps failing.
func (s *Stream) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	s.r.Write(p)
	// Lines are let go in batches of at least reach, so that moving the
	// held ones down costs the output's length once over, amortized.
	if k := s.r.finalLines(); k > s.r.reach {
		if _, err := s.w.Write(s.r.cut(k)); err != nil {
			s.err = err
			return 0, err
		}
	}
	return len(p), nil
}

// WriteString is Write for a string.
func (s *Stream) WriteString(p string) (int, error) { return s.Write([]byte(p)) }

// Close writes the rest of the text, as Renderer.String shows it: the end
// of the output.
func (s *Stream) Close() error {
	if s.err != nil {
		return s.err
	}
	if k := s.r.finalLines(); k > 0 {
		if _, err := s.w.Write(s.r.cut(k)); err != nil {
			s.err = err
			return err
		}
	}
	_, err := io.WriteString(s.w, s.r.String())
	s.err = err
	return err
}

// top is the highest row a cursor-up may reach: reach lines above the last
// line, or the first line when the Renderer has no reach.
func (r *Renderer) top() int {
	if r.reach <= 0 {
		return 0
	}
	return max(0, len(r.starts)-1-r.reach)
}

// finalLines is how many lines at the top no later output can change: above
// both the highest row a cursor-up may reach and the cursor's row.
func (r *Renderer) finalLines() int {
	if r.reach <= 0 || r.starts == nil {
		return 0
	}
	return min(r.top(), r.row)
}

// cut removes the first k lines, k at most finalLines, and returns their
// text, each line followed by '\n'.
func (r *Renderer) cut(k int) []byte {
	end := r.starts[k]
	out := make([]byte, 0, end)
	prev := 0
	for row := range k {
		ln := r.over[row]
		if ln == nil {
			continue
		}
		out = append(out, r.buf[prev:r.starts[row]]...)
		out = append(out, ln.text()...)
		prev = r.starts[row+1] - 1
		delete(r.over, row)
		if ln.active {
			r.active = slices.DeleteFunc(r.active, func(a *line) bool { return a == ln })
		}
	}
	out = append(out, r.buf[prev:end]...)

	if r.shared {
		r.buf = append(make([]byte, 0, cap(r.buf)), r.buf[end:]...)
		r.shared = false
	} else {
		r.buf = r.buf[:copy(r.buf, r.buf[end:])]
	}
	n := copy(r.starts, r.starts[k:])
	r.starts = r.starts[:n]
	for i := range r.starts {
		r.starts[i] -= end
	}
	if len(r.over) > 0 {
		moved := make(map[int]*line, len(r.over))
		for row, ln := range r.over {
			moved[row-k] = ln
		}
		r.over = moved
	}
	r.row -= k
	return out
}
