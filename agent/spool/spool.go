package spool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"shelljob.dev/shelljob/internal/agentapi"
)

// Limits caps what a spool keeps. A zero field takes its default.
type Limits struct {
	// HeadBytes is how much of the start is kept. Defaults to 16 MiB.
	HeadBytes int64 `json:"headBytes"`
	// TailBytes is how much of the end is kept. Defaults to 16 MiB.
	TailBytes int64 `json:"tailBytes"`
	// AfterStopBytes is how much more is kept after Stop. Defaults to
	// 256 KiB, brish's read-ahead after its first signal.
	AfterStopBytes int64 `json:"afterStopBytes"`
	// ChunkBytes is the size of each file the output is stored in, and so
	// how finely the dropped middle is freed while the command runs.
	// Defaults to 1 MiB.
	ChunkBytes int64 `json:"chunkBytes"`
}

// Defaults of Limits, as the reference keeps per stream.
const (
	DefaultHeadBytes      = 16 << 20
	DefaultTailBytes      = 16 << 20
	DefaultAfterStopBytes = 256 << 10
	DefaultChunkBytes     = 1 << 20
)

// MaxDisk is the most disk a spool of these limits takes: what it keeps,
// and a chunk at either end of the gap, partly kept.
func (l Limits) MaxDisk() int64 {
	l = l.withDefaults()
	return l.HeadBytes + l.TailBytes + l.AfterStopBytes + 2*l.ChunkBytes
}

func (l Limits) withDefaults() Limits {
	if l.HeadBytes <= 0 {
		l.HeadBytes = DefaultHeadBytes
	}
	if l.TailBytes <= 0 {
		l.TailBytes = DefaultTailBytes
	}
	if l.AfterStopBytes <= 0 {
		l.AfterStopBytes = DefaultAfterStopBytes
	}
	if l.ChunkBytes <= 0 {
		l.ChunkBytes = DefaultChunkBytes
	}
	return l
}

const (
	metaFile  = "spool.json"
	chunkExt  = ".out"
	readBytes = 256 << 10 // a data frame at most: large enough for pipe speed
)

// ErrClosed is returned by Write after Close.
var ErrClosed = errors.New("spool closed")

// Stats are a spool's counters.
type Stats struct {
	// Written counts the bytes the command wrote.
	Written int64
	// Dropped counts those of them that were not kept.
	Dropped int64
	// LastWrite is when the command last wrote; zero before that.
	LastWrite time.Time
	// Closed is true once the output is closed.
	Closed bool
}

// meta is what spool.json holds: the limits from the start, and the state
// from Close.
type meta struct {
	Limits    Limits    `json:"limits"`
	Closed    bool      `json:"closed"`
	Written   int64     `json:"written,omitempty"`
	End       int64     `json:"end,omitempty"`
	HeadEnd   *int64    `json:"headEnd,omitempty"`
	GapEnd    int64     `json:"gapEnd,omitempty"`
	LastWrite time.Time `json:"lastWrite,omitzero"`
}

// Spool is one command's output. Write and Close belong to one goroutine;
// Stop, Stats and Follow may be called from any.
type Spool struct {
	dir string
	lim Limits

	mu sync.Mutex
	// written counts what the command wrote; end what was stored, which is
	// less only after a stop.
	written, end int64
	// stopLimit is where storing ends after a stop; -1 before one.
	stopLimit int64
	// headEnd is where the head ends, -1 until something must be dropped.
	// [headEnd, gapEnd) is the dropped middle when gapEnd > headEnd.
	headEnd, gapEnd int64
	closed          bool
	lastWrite       time.Time
	changed         chan struct{}

	// The writer's own: the chunk being written and the starts of the
	// chunks on disk, ascending.
	cur      *os.File
	curStart int64
	chunks   []int64
}

// Create makes an empty spool in dir, which it creates.
func Create(dir string, lim Limits) (*Spool, error) {
	lim = lim.withDefaults()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create spool: %w", err)
	}
	s := newSpool(dir, lim)
	if err := s.saveMeta(meta{Limits: lim}); err != nil {
		return nil, fmt.Errorf("create spool: %w", err)
	}
	return s, nil
}

func newSpool(dir string, lim Limits) *Spool {
	return &Spool{dir: dir, lim: lim, stopLimit: -1, headEnd: -1, changed: make(chan struct{})}
}

// Open opens the spool in dir as it was left. A spool that was never
// closed (its writer died) is recovered from its files and closed.
func Open(dir string) (*Spool, error) {
	b, err := os.ReadFile(filepath.Join(dir, metaFile))
	if err != nil {
		return nil, fmt.Errorf("open spool: %w", err)
	}
	var m meta
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("open spool %s: %w", dir, err)
	}
	s := newSpool(dir, m.Limits.withDefaults())
	if s.chunks, err = listChunks(dir); err != nil {
		return nil, fmt.Errorf("open spool: %w", err)
	}
	if m.HeadEnd != nil {
		s.headEnd = *m.HeadEnd
	}
	if m.Closed {
		s.written, s.end, s.gapEnd = m.Written, m.End, m.GapEnd
		s.lastWrite, s.closed = m.LastWrite, true
		return s, nil
	}
	if err := s.recover(); err != nil {
		return nil, fmt.Errorf("recover spool %s: %w", dir, err)
	}
	if err := s.Close(); err != nil {
		return nil, err
	}
	return s, nil
}

// recover rebuilds the state of an unclosed spool from its chunk files.
func (s *Spool) recover() error {
	if len(s.chunks) == 0 {
		return nil
	}
	last := s.chunks[len(s.chunks)-1]
	fi, err := os.Stat(s.chunkPath(last))
	if err != nil {
		return err
	}
	s.end = last + fi.Size()
	s.written = s.end
	s.lastWrite = fi.ModTime()
	for i, c := range s.chunks {
		if c != int64(i)*s.lim.ChunkBytes {
			// A hole: the middle was dropped, so the head was decided
			// and saved.
			if s.headEnd < 0 {
				return errors.New("chunks missing before the head was decided")
			}
			s.gapEnd = c
			break
		}
	}
	return nil
}

func listChunks(dir string) ([]int64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var starts []int64
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), chunkExt)
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(name, 10, 64); err == nil {
			starts = append(starts, n)
		}
	}
	slices.Sort(starts)
	return starts, nil
}

func (s *Spool) chunkPath(start int64) string {
	return filepath.Join(s.dir, fmt.Sprintf("%020d%s", start, chunkExt))
}

func (s *Spool) saveMeta(m meta) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	tmp := filepath.Join(s.dir, metaFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(s.dir, metaFile))
}

// Write stores p within the caps. It fails only when the spool is closed;
// a disk error stops storing, as a stop would, and is returned once.
func (s *Spool) Write(p []byte) (int, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return 0, ErrClosed
	}
	q := p
	if s.stopLimit >= 0 && int64(len(q)) > s.stopLimit-s.end {
		c := cutBefore(q, int(max(0, s.stopLimit-s.end)))
		q = q[:c]
		s.stopLimit = s.end + int64(c)
	}
	s.mu.Unlock()

	stored, werr := s.store(q)

	s.mu.Lock()
	s.written += int64(len(p))
	s.end += stored
	if len(p) > 0 {
		s.lastWrite = time.Now()
	}
	if werr != nil && s.stopLimit < 0 {
		s.stopLimit = s.end
	}
	s.notifyLocked()
	s.mu.Unlock()

	if err := s.trim(); err != nil && werr == nil {
		werr = err
	}
	if werr != nil {
		return len(p), fmt.Errorf("spool %s: %w", s.dir, werr)
	}
	return len(p), nil
}

// store appends q to the chunk files, and returns how much it stored. Only
// the writer touches them.
func (s *Spool) store(q []byte) (int64, error) {
	end := s.end // only the writer moves end
	var stored int64
	for len(q) > 0 {
		if s.cur == nil || end >= s.curStart+s.lim.ChunkBytes {
			if s.cur != nil {
				if err := s.cur.Close(); err != nil {
					return stored, err
				}
				s.cur = nil
			}
			start := end - end%s.lim.ChunkBytes
			f, err := os.OpenFile(s.chunkPath(start), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
			if err != nil {
				return stored, err
			}
			s.cur, s.curStart = f, start
			s.mu.Lock()
			if len(s.chunks) == 0 || s.chunks[len(s.chunks)-1] != start {
				s.chunks = append(s.chunks, start)
			}
			s.mu.Unlock()
		}
		n := min(int64(len(q)), s.curStart+s.lim.ChunkBytes-end)
		m, err := s.cur.Write(q[:n])
		stored += int64(m)
		if err != nil {
			return stored, err
		}
		q = q[n:]
		end += n
	}
	return stored, nil
}

// trim deletes the chunks that have fallen between the head and the tail.
func (s *Spool) trim() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.trimLocked(s.end - s.lim.TailBytes)
}

// trimLocked drops the middle up to keepFrom, in whole chunks.
func (s *Spool) trimLocked(keepFrom int64) error {
	if s.end <= s.lim.HeadBytes+s.lim.TailBytes {
		return nil
	}
	if s.headEnd < 0 {
		h, err := s.decideHead()
		if err != nil {
			return err
		}
		// Saved now: once the middle goes, the bytes that decide it may go.
		if err := s.saveMeta(meta{Limits: s.lim, HeadEnd: &h}); err != nil {
			return err
		}
		s.headEnd = h
	}
	var doomed []int64
	for _, c := range s.chunks {
		if c >= s.headEnd && c+s.lim.ChunkBytes <= keepFrom && c != s.curStart {
			doomed = append(doomed, c)
			s.gapEnd = max(s.gapEnd, c+s.lim.ChunkBytes)
		}
	}
	if len(doomed) == 0 {
		return nil
	}
	s.chunks = slices.DeleteFunc(s.chunks, func(c int64) bool { return slices.Contains(doomed, c) })
	s.notifyLocked()
	// Readers see the gap before the files go; one that opened a chunk
	// already reads on from the unlinked file.
	var err error
	for _, c := range doomed {
		if e := os.Remove(s.chunkPath(c)); e != nil && !errors.Is(e, fs.ErrNotExist) {
			err = e
		}
	}
	return err
}

// decideHead returns where the head ends: at HeadBytes, or before a
// character that HeadBytes would cut.
func (s *Spool) decideHead() (int64, error) {
	h := s.lim.HeadBytes
	b := make([]byte, min(h, utf8.UTFMax-1))
	if _, err := s.readAt(b, h-int64(len(b))); err != nil {
		return 0, err
	}
	return h - int64(incompleteSuffix(b)), nil
}

// Stop marks the command stopped: at most AfterStopBytes more is kept. It
// reports whether this was the first stop.
func (s *Spool) Stop() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopLimit >= 0 || s.closed {
		return false
	}
	s.stopLimit = s.end + s.lim.AfterStopBytes
	return true
}

// Close ends the output: the tail is trimmed to TailBytes, the state is
// saved beside the chunks, and followers finish.
func (s *Spool) Close() error {
	var err error
	if s.cur != nil {
		err = s.cur.Close()
		s.cur = nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return err
	}
	s.curStart = -1
	if s.end > s.lim.HeadBytes+s.lim.TailBytes {
		from, e := s.tailStartLocked()
		if e == nil {
			e = s.trimLocked(from)
			s.gapEnd = max(s.gapEnd, from)
		}
		err = errors.Join(err, e)
	}
	s.closed = true
	s.notifyLocked()
	m := meta{Limits: s.lim, Closed: true, Written: s.written, End: s.end,
		GapEnd: s.gapEnd, LastWrite: s.lastWrite}
	if s.headEnd >= 0 {
		m.HeadEnd = &s.headEnd
	}
	if e := s.saveMeta(m); e != nil {
		err = errors.Join(err, e)
	}
	if err != nil {
		return fmt.Errorf("close spool %s: %w", s.dir, err)
	}
	return nil
}

// tailStartLocked is where the final tail starts: TailBytes before the
// end, moved forward to the start of a character.
func (s *Spool) tailStartLocked() (int64, error) {
	t := s.end - s.lim.TailBytes
	return s.charStart(t, s.end)
}

// charStart moves off past the continuation bytes there, when a character
// starts within the next few bytes; otherwise (binary data) it stays.
func (s *Spool) charStart(off, end int64) (int64, error) {
	b := make([]byte, min(utf8.UTFMax, end-off))
	if _, err := s.readAt(b, off); err != nil {
		return 0, err
	}
	for i, c := range b {
		if utf8.RuneStart(c) {
			return off + int64(i), nil
		}
	}
	return off, nil
}

// readAt reads len(p) stored bytes at off, across chunks.
func (s *Spool) readAt(p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		start := (off + int64(n)) / s.lim.ChunkBytes * s.lim.ChunkBytes
		f, err := os.Open(s.chunkPath(start))
		if err != nil {
			return n, err
		}
		want := min(len(p)-n, int(start+s.lim.ChunkBytes-off-int64(n)))
		m, err := f.ReadAt(p[n:n+want], off+int64(n)-start)
		f.Close()
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func (s *Spool) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Stats returns the counters.
func (s *Spool) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{Written: s.written, Dropped: s.droppedLocked(), LastWrite: s.lastWrite, Closed: s.closed}
}

func (s *Spool) droppedLocked() int64 {
	d := s.written - s.end
	if s.headEnd >= 0 && s.gapEnd > s.headEnd {
		d += s.gapEnd - s.headEnd
	}
	return d
}

// view is what a reader needs of the state at one moment.
type view struct {
	written, end, headEnd, gapEnd int64
	closed                        bool
	changed                       <-chan struct{}
}

func (v view) inGap(pos int64) bool {
	return v.headEnd >= 0 && v.gapEnd > v.headEnd && pos >= v.headEnd && pos < v.gapEnd
}

func (s *Spool) view() view {
	s.mu.Lock()
	defer s.mu.Unlock()
	return view{s.written, s.end, s.headEnd, s.gapEnd, s.closed, s.changed}
}

// ErrOffset is returned by Follow for an offset past the end of a closed
// spool.
var ErrOffset = errors.New("offset past the end of the output")

// Follow sends sink the output from offset on as it is written: the kept
// bytes, and for what was not kept a Gap or an AfterStop. It returns once
// the spool is closed and everything was sent, or when ctx ends, with the
// offset reached.
func (s *Spool) Follow(ctx context.Context, offset int64, sink agentapi.FollowSink) (int64, error) {
	r := reader{s: s}
	defer r.close()
	pos := offset
	buf := make([]byte, readBytes)
	for {
		v := s.view()
		switch {
		case pos > v.written && v.closed:
			return pos, fmt.Errorf("follow from %d of %d bytes: %w", pos, v.written, ErrOffset)
		case v.inGap(pos):
			to := v.gapEnd
			if to < v.end {
				var err error
				if to, err = s.charStart(to, v.end); err != nil {
					if errors.Is(err, fs.ErrNotExist) {
						continue // the chunk went meanwhile: look again
					}
					return pos, fmt.Errorf("read spool %s: %w", s.dir, err)
				}
			}
			if err := sink.Gap(to - pos); err != nil {
				return pos, err
			}
			pos = to
		case pos < v.end:
			limit := v.end
			if v.inGap(v.headEnd) && pos < v.headEnd {
				limit = v.headEnd
			}
			n, err := r.read(buf[:min(int64(len(buf)), limit-pos)], pos)
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) && s.view().inGap(pos) {
					continue // trimmed between the view and the read
				}
				return pos, fmt.Errorf("read spool %s at %d: %w", s.dir, pos, err)
			}
			if err := sink.Data(buf[:n]); err != nil {
				return pos, err
			}
			pos += int64(n)
		case v.closed:
			if pos < v.written {
				if err := sink.AfterStop(v.written - pos); err != nil {
					return pos, err
				}
				pos = v.written
			}
			return pos, nil
		default:
			select {
			case <-v.changed:
			case <-ctx.Done():
				return pos, ctx.Err()
			}
		}
	}
}

// reader keeps the chunk it reads open, so that the writer may unlink it.
type reader struct {
	s     *Spool
	f     *os.File
	start int64
}

// read reads up to the end of the chunk that holds pos.
func (r *reader) read(p []byte, pos int64) (int, error) {
	c := r.s.lim.ChunkBytes
	start := pos / c * c
	if r.f == nil || r.start != start {
		r.close()
		f, err := os.Open(r.s.chunkPath(start))
		if err != nil {
			return 0, err
		}
		r.f, r.start = f, start
	}
	p = p[:min(int64(len(p)), start+c-pos)]
	n, err := r.f.ReadAt(p, pos-start)
	if err == io.EOF && n == len(p) {
		err = nil
	}
	return n, err
}

func (r *reader) close() {
	if r.f != nil {
		r.f.Close()
		r.f = nil
	}
}

// incompleteSuffix is the length of a character that b cuts at its end.
func incompleteSuffix(b []byte) int {
	for i := 1; i <= len(b) && i < utf8.UTFMax; i++ {
		c := b[len(b)-i]
		if !utf8.RuneStart(c) {
			continue
		}
		if need := seqLen(c); need > i {
			return i
		}
		return 0
	}
	return 0
}

// seqLen is the length of the UTF-8 sequence that lead byte c starts.
func seqLen(c byte) int {
	switch {
	case c >= 0xF8:
		return 1
	case c >= 0xF0:
		return 4
	case c >= 0xE0:
		return 3
	case c >= 0xC0:
		return 2
	}
	return 1
}

// cutBefore returns n, or less so that p[:n] ends on a whole character.
func cutBefore(p []byte, n int) int {
	return n - incompleteSuffix(p[max(0, n-(utf8.UTFMax-1)):n])
}
