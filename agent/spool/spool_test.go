package spool

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"shelljob.dev/shelljob/internal/agentapi"
)

var small = Limits{HeadBytes: 10, TailBytes: 10, AfterStopBytes: 5, ChunkBytes: 4}

func newTestSpool(t *testing.T, lim Limits) *Spool {
	t.Helper()
	s, err := Create(t.TempDir(), lim)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// writeAll writes data in pieces of the given size.
func writeAll(t *testing.T, s *Spool, data []byte, piece int) {
	t.Helper()
	for len(data) > 0 {
		n := min(piece, len(data))
		if _, err := s.Write(data[:n]); err != nil {
			t.Fatal(err)
		}
		data = data[n:]
	}
}

func followText(t *testing.T, s *Spool, offset int64) (string, int64) {
	t.Helper()
	var b strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	end, err := s.Follow(ctx, offset, agentapi.TextSink{W: &b})
	if err != nil {
		t.Fatalf("follow from %d: %v", offset, err)
	}
	return b.String(), end
}

func TestCaps(t *testing.T) {
	digits := []byte(strings.Repeat("0123456789", 10))
	e := strings.Repeat("é", 50) // 100 bytes, characters at even offsets
	tests := map[string]struct {
		lim       Limits
		data      []byte
		piece     int
		stopAfter int // bytes written before Stop; -1 for none
		want      string
		dropped   int64
	}{
		"under the caps": {
			lim: small, data: []byte("hello world"), piece: 3, stopAfter: -1,
			want: "hello world",
		},
		"exactly the caps": {
			lim: small, data: digits[:20], piece: 7, stopAfter: -1,
			want: string(digits[:20]),
		},
		"head and tail": {
			lim: small, data: digits, piece: 3, stopAfter: -1,
			want: "0123456789" + agentapi.GapLine(80) + "0123456789", dropped: 80,
		},
		"one write": {
			lim: small, data: digits, piece: 1000, stopAfter: -1,
			want: "0123456789" + agentapi.GapLine(80) + "0123456789", dropped: 80,
		},
		"cuts keep characters whole": {
			lim:  Limits{HeadBytes: 11, TailBytes: 11, AfterStopBytes: 5, ChunkBytes: 4},
			data: []byte(e), piece: 7, stopAfter: -1,
			want: strings.Repeat("é", 5) + agentapi.GapLine(80) + strings.Repeat("é", 5), dropped: 80,
		},
		"after a stop": {
			lim: small, data: digits[:30], piece: 4, stopAfter: 3,
			want: "01234567" + agentapi.AfterStopLine(22), dropped: 22,
		},
		"after a stop, characters whole": {
			lim: small, data: []byte(e[:40]), piece: 40, stopAfter: 0,
			want: "éé" + agentapi.AfterStopLine(36), dropped: 36,
		},
		"stop late in a long output": {
			lim: small, data: digits, piece: 5, stopAfter: 60,
			// 65 bytes stored: head 10, tail the 10 before the stop limit.
			want: "0123456789" + agentapi.GapLine(45) + "5678901234" + agentapi.AfterStopLine(35), dropped: 80,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := newTestSpool(t, tc.lim)
			if tc.stopAfter >= 0 {
				writeAll(t, s, tc.data[:tc.stopAfter], tc.piece)
				if !s.Stop() {
					t.Fatal("first Stop reported false")
				}
				if s.Stop() {
					t.Fatal("second Stop reported true")
				}
				writeAll(t, s, tc.data[tc.stopAfter:], tc.piece)
			} else {
				writeAll(t, s, tc.data, tc.piece)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			got, end := followText(t, s, 0)
			if got != tc.want {
				t.Errorf("kept\n%q\nwant\n%q", got, tc.want)
			}
			if end != int64(len(tc.data)) {
				t.Errorf("follow ended at %d, want %d", end, len(tc.data))
			}
			st := s.Stats()
			if st.Written != int64(len(tc.data)) || st.Dropped != tc.dropped || !st.Closed {
				t.Errorf("stats %+v, want written %d dropped %d closed", st, len(tc.data), tc.dropped)
			}
			// A reopened spool (a restarted agent) keeps the same.
			r, err := Open(s.dir)
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := followText(t, r, 0); got != tc.want {
				t.Errorf("reopened: kept\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

func TestFollowFromOffsets(t *testing.T) {
	digits := []byte(strings.Repeat("0123456789", 10))
	s := newTestSpool(t, small)
	writeAll(t, s, digits, 9)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		offset int64
		want   string
	}{
		{0, "0123456789" + agentapi.GapLine(80) + "0123456789"},
		{7, "789" + agentapi.GapLine(80) + "0123456789"},
		{10, agentapi.GapLine(80) + "0123456789"},
		{50, agentapi.GapLine(40) + "0123456789"},
		{95, "56789"},
		{100, ""},
	}
	for _, tc := range tests {
		if got, end := followText(t, s, tc.offset); got != tc.want || end != 100 {
			t.Errorf("from %d: %q (end %d), want %q (end 100)", tc.offset, got, end, tc.want)
		}
	}
	_, err := s.Follow(context.Background(), 101, agentapi.TextSink{W: &bytes.Buffer{}})
	if !errors.Is(err, ErrOffset) {
		t.Errorf("from 101: %v, want ErrOffset", err)
	}
}

// checkSink checks that every data byte is the source's byte at its offset.
type checkSink struct {
	src                 []byte
	pos                 int64
	data, gaps, stopped int64
	err                 error
}

func (c *checkSink) Data(p []byte) error {
	if !bytes.Equal(p, c.src[c.pos:c.pos+int64(len(p))]) && c.err == nil {
		c.err = fmt.Errorf("data at %d differs from the source", c.pos)
	}
	c.pos += int64(len(p))
	c.data += int64(len(p))
	return nil
}
func (c *checkSink) Gap(n int64) error       { c.pos += n; c.gaps += n; return nil }
func (c *checkSink) AfterStop(n int64) error { c.pos += n; c.stopped += n; return nil }

func TestLiveFollowers(t *testing.T) {
	src := make([]byte, 1<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range src {
		src[i] = byte(rng.IntN(256))
	}
	lim := Limits{HeadBytes: 64 << 10, TailBytes: 64 << 10, ChunkBytes: 4 << 10}
	s := newTestSpool(t, lim)

	// Followers that keep up, fall behind, or come and go.
	var wg sync.WaitGroup
	sinks := make([]*checkSink, 4)
	for i := range sinks {
		sinks[i] = &checkSink{src: src}
		wg.Go(func() {
			c := sinks[i]
			for {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i+1)*time.Millisecond)
				if i == 0 {
					ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
				}
				pos, err := s.Follow(ctx, c.pos, c)
				cancel()
				if pos != c.pos {
					c.err = fmt.Errorf("follow returned %d, sink at %d", pos, c.pos)
				}
				if err == nil || c.err != nil {
					return
				}
				time.Sleep(time.Duration(i) * time.Millisecond)
			}
		})
	}
	for off := 0; off < len(src); {
		n := min(1+rng.IntN(8<<10), len(src)-off)
		if _, err := s.Write(src[off : off+n]); err != nil {
			t.Fatal(err)
		}
		off += n
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, c := range sinks {
		if c.err != nil {
			t.Errorf("follower %d: %v", i, c.err)
		}
		if c.pos != int64(len(src)) {
			t.Errorf("follower %d ended at %d, want %d", i, c.pos, len(src))
		}
		if c.data < lim.HeadBytes+lim.TailBytes-utf8.UTFMax {
			t.Errorf("follower %d got %d data bytes, fewer than the caps keep", i, c.data)
		}
	}
	// After the end, a follow gives exactly the kept bytes.
	c := &checkSink{src: src}
	if _, err := s.Follow(context.Background(), 0, c); err != nil || c.err != nil {
		t.Fatal(err, c.err)
	}
	if c.data+c.gaps != int64(len(src)) || c.data > lim.HeadBytes+lim.TailBytes || c.data < lim.HeadBytes+lim.TailBytes-2*utf8.UTFMax {
		t.Errorf("final follow: %d data + %d gap bytes", c.data, c.gaps)
	}
	if st := s.Stats(); st.Dropped != c.gaps {
		t.Errorf("stats drop %d, follow skipped %d", st.Dropped, c.gaps)
	}
}

// blockSink blocks in Data until released.
type blockSink struct{ release chan struct{} }

func (b blockSink) Data([]byte) error     { <-b.release; return nil }
func (b blockSink) Gap(int64) error       { return nil }
func (b blockSink) AfterStop(int64) error { return nil }

func TestWriteNeverWaitsForReaders(t *testing.T) {
	s := newTestSpool(t, Limits{HeadBytes: 1 << 10, TailBytes: 1 << 10, ChunkBytes: 256})
	sink := blockSink{release: make(chan struct{})}
	done := make(chan error)
	go func() {
		_, err := s.Follow(context.Background(), 0, sink)
		done <- err
	}()
	chunk := bytes.Repeat([]byte("x"), 1000)
	for range 1000 { // 1 MB past a reader stuck in its first frame
		if _, err := s.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	close(sink.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Written != 1e6 || st.Dropped == 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestOpenRecoversUnclosed(t *testing.T) {
	digits := []byte(strings.Repeat("0123456789", 10))
	s := newTestSpool(t, small)
	writeAll(t, s, digits, 3) // never closed: the writer died
	r, err := Open(s.dir)
	if err != nil {
		t.Fatal(err)
	}
	got, end := followText(t, r, 0)
	want := "0123456789" + agentapi.GapLine(80) + "0123456789"
	if got != want || end != 100 {
		t.Errorf("recovered %q (end %d), want %q (end 100)", got, end, want)
	}
	if !r.Stats().Closed {
		t.Error("recovered spool not closed")
	}
}

func TestFollowWaitsForOutput(t *testing.T) {
	s := newTestSpool(t, small)
	var b bytes.Buffer
	done := make(chan int64)
	go func() {
		end, _ := s.Follow(context.Background(), 0, agentapi.TextSink{W: &b})
		done <- end
	}()
	writeAll(t, s, []byte("hi\n"), 10)
	select {
	case <-done:
		t.Fatal("follow ended before Close")
	case <-time.After(50 * time.Millisecond):
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if end := <-done; end != 3 || b.String() != "hi\n" {
		t.Errorf("follow got %q, ended at %d", b.String(), end)
	}
	if _, err := s.Write([]byte("x")); !errors.Is(err, ErrClosed) {
		t.Errorf("write after close: %v", err)
	}
}

func TestIncompleteSuffix(t *testing.T) {
	tests := map[string]int{
		"":                 0,
		"abc":              0,
		"a\xc3":            1,
		"\xc3\xa9":         0,
		"\xe2\x82":         2,
		"\xe2\x82\xac":     0,
		"\xf0\x9f\x98":     3,
		"\x9f\x98\x80":     0, // no start in sight: binary, left alone
		"\xff":             0,
		"ab\xf0\x9f\x98":   3,
		"\xf0\x9f\x98\x80": 0,
	}
	for in, want := range tests {
		if got := incompleteSuffix([]byte(in)); got != want {
			t.Errorf("incompleteSuffix(%q) = %d, want %d", in, got, want)
		}
	}
}

// BenchmarkWrite is the producer's cost: 256 MiB in pipe-sized writes,
// with the default caps, no reader.
func BenchmarkWrite(b *testing.B) {
	const size = 256 << 20
	chunk := make([]byte, 256<<10)
	b.SetBytes(size)
	for b.Loop() {
		s, err := Create(b.TempDir(), Limits{})
		if err != nil {
			b.Fatal(err)
		}
		for range size / len(chunk) {
			if _, err := s.Write(chunk); err != nil {
				b.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
