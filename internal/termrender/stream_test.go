package termrender

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

// streamed renders in through a Stream of reach, written in random pieces.
func streamed(t *testing.T, rng *rand.Rand, in string, reach int) string {
	t.Helper()
	var out bytes.Buffer
	s := NewStream(&out, reach)
	for rest := in; rest != ""; {
		k := min(len(rest), 1+rng.IntN(8))
		if _, err := s.WriteString(rest[:k]); err != nil {
			t.Fatal(err)
		}
		rest = rest[k:]
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// TestStreamMatchesModel compares the Stream with the model on random
// outputs: with a reach past every line, the model's own result; with a
// short one, the model whose cursor-up reaches as far.
func TestStreamMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 3000 {
		in := randomOutput(rng, 1+rng.IntN(120))
		if !NeedsRendering(in) {
			in += "\r"
		}
		if got, want := streamed(t, rng, in, DefaultReach), model(in); got != want {
			t.Fatalf("case %d: Stream(%q)\n got %q\nwant %q", i, in, got, want)
		}
		reach := 1 + rng.IntN(4)
		if got, want := streamed(t, rng, in, reach), modelReach(in, reach); got != want {
			t.Fatalf("case %d: Stream(%q) reach %d\n got %q\nwant %q", i, in, reach, got, want)
		}
	}
}

// TestStreamRedrawsAtItsReach redraws a multi-bar display long after the
// lines above it are written out.
func TestStreamRedrawsAtItsReach(t *testing.T) {
	var sb strings.Builder
	for i := range 5000 {
		sb.WriteString("log line ")
		sb.WriteString(strings.Repeat("é", i%7))
		sb.WriteString("\n")
	}
	sb.WriteString("bar 1\nbar 2\nbar 3\n")
	for i := range 300 {
		sb.WriteString("\x1b[3A\rbar 1 " + strings.Repeat("#", i%50) + "\x1b[K\n")
		sb.WriteString("\rbar 2 " + strings.Repeat("=", i%30) + "\x1b[K\n")
		sb.WriteString("\rbar 3 done\x1b[K\n")
	}
	in := sb.String()
	rng := rand.New(rand.NewPCG(5, 6))
	if got, want := streamed(t, rng, in, 10), Render(in); got != want {
		t.Errorf("Stream and Render differ: %d and %d bytes", len(got), len(want))
	}
}

// TestStreamHoldsItsReach writes a long output and checks that the Stream
// never holds much more than its reach of lines.
func TestStreamHoldsItsReach(t *testing.T) {
	var out bytes.Buffer
	s := NewStream(&out, 50)
	line := []byte(strings.Repeat("x", 99) + "\n")
	most := 0
	for i := range 100000 {
		if _, err := s.Write(line); err != nil {
			t.Fatal(err)
		}
		if i%7 == 0 {
			s.WriteString("\x1b[3A\r\x1b[2K\n\n\n")
		}
		most = max(most, len(s.r.starts))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if most > 2*50+2 {
		t.Errorf("held %d lines at most, want at most %d", most, 2*50+2)
	}
	if out.Len() < 100000*len(line)/2 {
		t.Errorf("wrote %d bytes", out.Len())
	}
}

// TestStreamKeepsFailing stops at the writer's first error.
func TestStreamKeepsFailing(t *testing.T) {
	boom := errors.New("boom")
	s := NewStream(failWriter{boom}, 1)
	s.WriteString("a\nb\nc\nd\n")
	if _, err := s.WriteString("e\n"); !errors.Is(err, boom) {
		t.Errorf("Write: %v, want %v", err, boom)
	}
	if err := s.Close(); !errors.Is(err, boom) {
		t.Errorf("Close: %v, want %v", err, boom)
	}
}

type failWriter struct{ err error }

func (f failWriter) Write([]byte) (int, error) { return 0, f.err }

// TestStreamReach checks the cursor-up's bound itself.
func TestStreamReach(t *testing.T) {
	for name, tc := range map[string]struct {
		in    string
		reach int
		want  string
	}{
		"within reach":   {"a\nb\nc\x1b[2Ax", 2, "ax\nb\nc"},
		"past reach":     {"a\nb\nc\x1b[5Ax", 1, "a\nbx\nc"},
		"up twice past":  {"a\nb\nc\x1b[A\x1b[Ax", 1, "a\nbx\nc"},
		"top moves down": {"a\nb\x1b[A\nc\nd\ne\x1b[5Ax", 1, "a\nc\ndx\ne"},
		"back at bottom": {"1\n2\n3\n4\n5\x1b[9A\n\n\n\x1b[2Ax", 2, "1\n2\n3\nx\n5\n"},
	} {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, 8))
			if got := streamed(t, rng, tc.in, tc.reach); got != tc.want {
				t.Errorf("Stream(%q) reach %d = %q, want %q", tc.in, tc.reach, got, tc.want)
			}
			if got := modelReach(tc.in, tc.reach); got != tc.want {
				t.Errorf("modelReach(%q, %d) = %q, want %q", tc.in, tc.reach, got, tc.want)
			}
		})
	}
}
