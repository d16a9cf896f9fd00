package liveoutput

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"unicode/utf8"

	"shelljob.dev/shelljob/internal/utf16text"

	"shelljob.dev/shelljob/internal/termrender"
)

// The reference's caps.
const (
	DefaultHeadBytes      = 16 << 20
	DefaultTailBytes      = 16 << 20
	DefaultAfterStopBytes = 256 << 10
	DefaultPreviewBytes   = 16 << 10
)

// Options sets the caps of an Output. A zero field takes its default; a
// negative one keeps nothing.
type Options struct {
	// HeadBytes is how much of the start of each stream is kept.
	// Defaults to 16 MiB.
	HeadBytes int
	// TailBytes is how much of the end of each stream is kept, after its
	// head. Defaults to 16 MiB.
	TailBytes int
	// AfterStopBytes is how much more is kept after MarkStopped, both
	// streams together: a command can print a report on its way out.
	// Defaults to 256 KiB.
	AfterStopBytes int
	// PreviewBytes is how much of the latest output, both streams in
	// arrival order, TailText reads from. Defaults to 16 KiB.
	PreviewBytes int
	// Budget, when set, is where the heads' memory comes from: each head
	// keeps at most HeadBytes, and no more than the budget grants it.
	Budget *Budget
}

func (o *Options) setDefaults() {
	for _, f := range []struct {
		v   *int
		def int
	}{
		{&o.HeadBytes, DefaultHeadBytes},
		{&o.TailBytes, DefaultTailBytes},
		{&o.AfterStopBytes, DefaultAfterStopBytes},
		{&o.PreviewBytes, DefaultPreviewBytes},
	} {
		switch {
		case *f.v == 0:
			*f.v = f.def
		case *f.v < 0:
			*f.v = 0
		}
	}
}

// Stream is one of a command's two output streams.
type Stream int

const (
	Stdout Stream = iota
	Stderr
)

func (s Stream) String() string {
	switch s {
	case Stdout:
		return "stdout"
	case Stderr:
		return "stderr"
	}
	return fmt.Sprintf("Stream(%d)", int(s))
}

// An Output keeps what a command wrote so far. Make one with New. Its
// methods are safe for concurrent use.
type Output struct {
	changed chan struct{}

	mu      sync.Mutex
	opts    Options
	streams [2]store
	written [2]int64
	preview ring
	stopped bool
	// room is what may still be kept after the stop.
	room int
	// notKeptAfterStop counts what was written after the stop and dropped.
	notKeptAfterStop int64
}

// New returns an empty Output with the caps of opts.
func New(opts Options) *Output {
	opts.setDefaults()
	o := &Output{
		changed: make(chan struct{}, 1),
		opts:    opts,
		preview: ring{max: opts.PreviewBytes},
	}
	for i := range o.streams {
		o.streams[i] = store{headMax: opts.HeadBytes, budget: opts.Budget, tail: ring{max: opts.TailBytes}}
	}
	return o
}

// Release gives the memory of the heads back to the budget (Options.Budget)
// and drops them. Call it once the Output is read no more.
func (o *Output) Release() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for i := range o.streams {
		o.streams[i].release()
	}
}

// KeptAll tells whether every byte written is kept: FinalText then shows
// the whole output.
func (o *Output) KeptAll() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, s := range o.streams {
		if s.tail.total > int64(s.tail.len()) {
			return false
		}
	}
	return o.notKeptAfterStop == 0
}

// Write adds p to stream s, Stdout or Stderr. It keeps no reference to p,
// and wakes a reader of Changed if anything was kept.
func (o *Output) Write(s Stream, p []byte) {
	if s != Stdout && s != Stderr {
		panic(fmt.Sprintf("liveoutput: write to %v", s))
	}
	o.mu.Lock()
	o.written[s] += int64(len(p))
	var dropped []byte
	if o.stopped {
		keep := min(len(p), o.room)
		p, dropped = p[:keep], p[keep:]
		o.room -= keep
		o.notKeptAfterStop += int64(len(dropped))
	}
	kept := len(p) > 0
	if kept {
		o.streams[s].add(p)
		o.preview.write(p)
	}
	if len(dropped) > 0 && isContinuation(dropped[0]) {
		// The stop's cut fell inside a character: its start goes too.
		o.notKeptAfterStop += int64(o.streams[s].trimCutChar())
	}
	o.mu.Unlock()
	if kept {
		o.Notify()
	}
}

// Writer returns an io.Writer that writes to stream s. Its Write never
// fails.
func (o *Output) Writer(s Stream) io.Writer {
	return streamWriter{o, s}
}

type streamWriter struct {
	o *Output
	s Stream
}

func (w streamWriter) Write(p []byte) (int, error) {
	w.o.Write(w.s, p)
	return len(p), nil
}

// MarkStopped caps what is kept from now on at AfterStopBytes more. Only
// the first call counts.
func (o *Output) MarkStopped() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.stopped {
		o.stopped = true
		o.room = o.opts.AfterStopBytes
	}
}

// Changed returns a channel that receives after output was kept or Notify
// was called. It holds at most one value: a burst of writes wakes a reader
// once, and the reader reads what the whole burst wrote.
func (o *Output) Changed() <-chan struct{} {
	return o.changed
}

// Notify wakes a reader of Changed with no new output: for a change the
// reader shows beside it, such as the job's state.
func (o *Output) Notify() {
	select {
	case o.changed <- struct{}{}:
	default:
	}
}

// Written returns how many bytes were written to stream s, kept or not.
func (o *Output) Written(s Stream) int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.written[s]
}

// TailText returns the latest output, both streams in arrival order, for a
// preview: at most maxUTF16Units UTF-16 code units, as Telegram counts a
// message's length, and never part of a character. Bytes that are not UTF-8
// show as U+FFFD, and a character cut at either end of the window is left
// out. With render, the text is rendered as a terminal shows it
// (termrender.Render); a window cut from a longer output first starts at its
// first whole line (termrender.LineAligned), so that a '\r' or a cursor-up
// at its start acts inside it.
func (o *Output) TailText(maxUTF16Units int, render bool) string {
	o.mu.Lock()
	data := o.preview.appendTo(nil)
	cut := o.preview.total > int64(o.preview.max)
	o.mu.Unlock()
	if cut {
		data = skipContinuations(data)
	}
	text := decodeReplace(data)
	if render {
		if cut {
			text = termrender.LineAligned(text)
		}
		text = termrender.Render(text)
	}
	return utf16text.Tail(text, maxUTF16Units)
}

// FinalText returns everything kept: stdout, then stderr, each decoded
// whole, with a byte that is not UTF-8 shown as a \xNN escape. A line
// "[… N bytes not kept …]" stands where a stream's middle was dropped, and
// a last line "[… N bytes written after the stop not kept …]" counts what
// the stop's cap dropped. With render, each stream is rendered on its own
// (termrender.Render), so that a '\r' or a cursor-up at the start of stderr
// cannot reach the end of stdout. Rendering the largest output the caps keep
// takes a while; call it off a latency-sensitive path.
func (o *Output) FinalText(render bool) string {
	var parts [2]storeCopy
	o.mu.Lock()
	for i := range o.streams {
		parts[i] = o.streams[i].copy()
	}
	notKept := o.notKeptAfterStop
	o.mu.Unlock()
	var sb strings.Builder
	for _, p := range parts {
		text := p.text()
		if render {
			text = termrender.Render(text)
		}
		sb.WriteString(text)
	}
	if notKept > 0 {
		sb.WriteString(notKeptLine(notKept, "written after the stop "))
	}
	return sb.String()
}

func notKeptLine(n int64, what string) string {
	return fmt.Sprintf("\n[… %d bytes %snot kept …]\n", n, what)
}

// A store keeps one stream: its first headMax bytes (at most what its
// budget grants), and the last bytes after those in tail.
type store struct {
	headMax  int
	head     []byte
	headDone bool
	tail     ring
	// budget, when set, grants the head its memory: granted bytes, which
	// bound the head's capacity.
	budget  *Budget
	granted int
}

func (s *store) add(p []byte) {
	if !s.headDone {
		limit := s.headLimit(len(p))
		room := limit - len(s.head)
		if len(p) <= room {
			s.head = appendCapped(s.head, p, limit)
			return
		}
		s.head = appendCapped(s.head, p[:room], limit)
		p = p[room:]
		s.headDone = true
		if isContinuation(p[0]) {
			// The head's end cuts a character: it goes to the tail whole.
			if k := cutCharLen(s.head); k > 0 {
				s.tail.write(s.head[len(s.head)-k:])
				s.head = s.head[:len(s.head)-k]
			}
		}
	}
	s.tail.write(p)
}

// headLimit returns how long the head may grow to take n more bytes: its
// cap, or with a budget what the budget granted, asked for more first as
// an append would grow the head, doubling.
func (s *store) headLimit(n int) int {
	if s.budget == nil {
		return s.headMax
	}
	if len(s.head)+n > s.granted && s.granted < s.headMax {
		want := min(s.headMax, max(len(s.head)+n, 2*s.granted, 512)) - s.granted
		s.granted += s.budget.take(want)
	}
	return s.granted
}

func (s *store) release() {
	s.head, s.headDone = nil, true
	if s.budget != nil {
		s.budget.give(s.granted)
		s.granted = 0
	}
}

// trimCutChar drops a character cut at the end of what is kept, and
// returns how many bytes it dropped.
func (s *store) trimCutChar() int {
	if !s.headDone {
		k := cutCharLen(s.head)
		s.head = s.head[:len(s.head)-k]
		return k
	}
	k := cutCharLen(s.tail.last(utf8.UTFMax - 1))
	s.tail.truncate(k)
	return k
}

// A storeCopy is what a store keeps, copied to read without the lock.
type storeCopy struct {
	head, tail []byte
	dropped    int64
}

func (s *store) copy() storeCopy {
	// The head is only ever appended to, and cut back only when nothing
	// more will be kept, so its bytes up to here stay as they are.
	return storeCopy{
		head:    s.head[:len(s.head):len(s.head)],
		tail:    s.tail.appendTo(nil),
		dropped: s.tail.total - int64(s.tail.len()),
	}
}

func (c storeCopy) text() string {
	if c.dropped == 0 {
		return DecodeEscape(append(c.head, c.tail...))
	}
	tail := skipContinuations(c.tail)
	dropped := c.dropped + int64(len(c.tail)-len(tail))
	return DecodeEscape(c.head) + notKeptLine(dropped, "") + DecodeEscape(tail)
}

// A ring keeps the last max bytes written to it.
type ring struct {
	max int
	// buf grows up to max bytes, then wraps: the oldest byte is at start.
	buf   []byte
	start int
	// total counts every byte written, kept or not.
	total int64
}

func (r *ring) len() int { return len(r.buf) }

func (r *ring) write(p []byte) {
	r.total += int64(len(p))
	if len(p) >= r.max {
		if r.max > 0 {
			r.buf = appendCapped(r.buf[:0], p[len(p)-r.max:], r.max)
			r.start = 0
		}
		return
	}
	if room := r.max - len(r.buf); room > 0 {
		n := min(room, len(p))
		r.buf = appendCapped(r.buf, p[:n], r.max)
		p = p[n:]
	}
	for len(p) > 0 {
		n := copy(r.buf[r.start:], p)
		p = p[n:]
		r.start = (r.start + n) % r.max
	}
}

// appendTo appends what r keeps, oldest first, to dst.
func (r *ring) appendTo(dst []byte) []byte {
	return append(append(dst, r.buf[r.start:]...), r.buf[:r.start]...)
}

// last returns up to n of the newest bytes.
func (r *ring) last(n int) []byte {
	n = min(n, len(r.buf))
	out := make([]byte, 0, n)
	for i := len(r.buf) - n; i < len(r.buf); i++ {
		out = append(out, r.buf[(r.start+i)%len(r.buf)])
	}
	return out
}

// truncate drops the newest n bytes, as if they had never been written.
func (r *ring) truncate(n int) {
	if n == 0 {
		return
	}
	if r.start != 0 {
		r.buf = r.appendTo(make([]byte, 0, len(r.buf)))
		r.start = 0
	}
	r.buf = r.buf[:len(r.buf)-n]
	r.total -= int64(n)
}

// appendCapped appends p to b, growing b's capacity to at most limit.
func appendCapped(b, p []byte, limit int) []byte {
	if need := len(b) + len(p); need > cap(b) {
		nb := make([]byte, len(b), min(limit, max(need, 2*cap(b), 512)))
		copy(nb, b)
		b = nb
	}
	return append(b, p...)
}
