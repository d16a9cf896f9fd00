package liveoutput

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A write is one write of a test: bytes to a stream, or the stop.
type write struct {
	s    Stream
	p    string
	stop bool
}

func out(p string) write  { return write{s: Stdout, p: p} }
func errw(p string) write { return write{s: Stderr, p: p} }

var stop = write{stop: true}

func replay(opts Options, writes []write) *Output {
	o := New(opts)
	for _, w := range writes {
		if w.stop {
			o.MarkStopped()
			continue
		}
		o.Write(w.s, []byte(w.p))
	}
	return o
}

func TestFinalText(t *testing.T) {
	tests := map[string]struct {
		opts          Options
		writes        []write
		raw, rendered string
	}{
		"nothing written": {},
		"a character split across writes": {
			writes: []write{out("\xc3"), out("\xa9\n")},
			raw:    "é\n", rendered: "é\n",
		},
		"an invalid byte": {
			writes: []write{out("a\xff"), out("b")},
			raw:    `a\xffb`, rendered: `a\xffb`,
		},
		"a character in three writes": {
			writes: []write{out("\xf0\x9f"), out("\x98"), out("\x80!")},
			raw:    "😀!", rendered: "😀!",
		},
		"a character cut at the end": {
			writes: []write{out("\xe2\x82")},
			raw:    `\xe2\x82`, rendered: `\xe2\x82`,
		},
		"stdout first, each stream decoded alone": {
			writes: []write{errw("e\xa9"), out("o\xc3")},
			raw:    `o\xc3e\xa9`, rendered: `o\xc3e\xa9`,
		},
		"render applies the renderer": {
			writes:   []write{out("10%\r\x1b[32m100%\x1b[0m\n")},
			raw:      "10%\r\x1b[32m100%\x1b[0m\n",
			rendered: "100%\n",
		},
		"stderr's carriage return does not reach stdout": {
			writes:   []write{out("answer: 42"), errw("\r  0%|   |\r100%|###|\n")},
			raw:      "answer: 42\r  0%|   |\r100%|###|\n",
			rendered: "answer: 42100%|###|\n",
		},
		"stderr's cursor-up does not reach stdout": {
			writes:   []write{out("Downloading\n"), errw("\x1b[1Awarning: x\n")},
			raw:      "Downloading\n\x1b[1Awarning: x\n",
			rendered: "Downloading\nwarning: x\n",
		},
		"head and tail with a marker between": {
			opts:   Options{HeadBytes: 10, TailBytes: 10},
			writes: []write{out("0123456"), out("789abc"), out("defghij"), out("KLMNOPQRST")},
			raw:    "0123456789\n[… 10 bytes not kept …]\nKLMNOPQRST",
		},
		"each stream has its own cap": {
			opts:   Options{HeadBytes: 2, TailBytes: 2},
			writes: []write{out("abcdef"), errw("12")},
			raw:    "ab\n[… 2 bytes not kept …]\nef12",
		},
		"the cuts never split a character": {
			opts:   Options{HeadBytes: 3, TailBytes: 2},
			writes: []write{out("aaé" + strings.Repeat("x", 10) + "éb")},
			raw:    "aa\n[… 14 bytes not kept …]\nb",
		},
		"the head's end between writes never splits a character": {
			opts:   Options{HeadBytes: 3, TailBytes: 2},
			writes: []write{out("aa\xc3"), out("\xa9xxxxb")},
			raw:    "aa\n[… 5 bytes not kept …]\nxb",
		},
		"a character moved out of the head is kept when nothing drops": {
			opts:   Options{HeadBytes: 3, TailBytes: 10},
			writes: []write{out("aa\xc3"), out("\xa9b")},
			raw:    "aaéb",
		},
		"the tail's start skips at most three continuation bytes": {
			opts:   Options{HeadBytes: 1, TailBytes: 5},
			writes: []write{out("a123\x80\x80\x80\x80z")},
			raw:    "a\n[… 6 bytes not kept …]\n\\x80z",
		},
		"a marker in a rendered stream": {
			opts:     Options{HeadBytes: 4, TailBytes: 6},
			writes:   []write{out("abc\n0123456789"), out("\rXY\n")},
			raw:      "abc\n\n[… 8 bytes not kept …]\n89\rXY\n",
			rendered: "abc\n\n[… 8 bytes not kept …]\nXY\n",
		},
		"after a stop only a little more is kept": {
			opts:   Options{AfterStopBytes: 4},
			writes: []write{out("before\n"), stop, errw("bye"), out("!!!")},
			raw:    "before\n!bye\n[… 2 bytes written after the stop not kept …]\n",
		},
		"nothing after a stop": {
			opts:   Options{AfterStopBytes: -1},
			writes: []write{out("a"), stop, out("bc")},
			raw:    "a\n[… 2 bytes written after the stop not kept …]\n",
		},
		"only the first stop counts": {
			opts:   Options{AfterStopBytes: 3},
			writes: []write{stop, out("ab"), stop, out("cd")},
			raw:    "abc\n[… 1 bytes written after the stop not kept …]\n",
		},
		"the stop's cut inside a character drops all of it": {
			opts:   Options{AfterStopBytes: 2},
			writes: []write{stop, out("aé!")},
			raw:    "a\n[… 3 bytes written after the stop not kept …]\n",
		},
		"the stop's cut between writes drops the character's start": {
			opts:   Options{AfterStopBytes: 2},
			writes: []write{out("x"), stop, out("a\xc3"), errw("e"), out("\xa9")},
			raw:    "xa\n[… 3 bytes written after the stop not kept …]\n",
		},
		"a stop with room left keeps whole writes": {
			opts:   Options{AfterStopBytes: 100},
			writes: []write{out("a"), stop, out("b"), errw("c")},
			raw:    "abc",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o := replay(tc.opts, tc.writes)
			if diff := cmp.Diff(tc.raw, o.FinalText(false)); diff != "" {
				t.Errorf("FinalText(false) (-want +got):\n%s", diff)
			}
			want := tc.rendered
			if want == "" {
				want = tc.raw
			}
			if diff := cmp.Diff(want, o.FinalText(true)); diff != "" {
				t.Errorf("FinalText(true) (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTailText(t *testing.T) {
	tests := map[string]struct {
		opts     Options
		writes   []write
		units    int
		render   bool
		want     string
		wantNext string // after a further write of next, if any
		next     write
	}{
		"arrival order": {
			writes: []write{out("out1 "), errw("err "), out("out2")},
			units:  100, want: "out1 err out2",
		},
		"within the bound": {
			writes: []write{out("out1 "), errw("err "), out("out2")},
			units:  4, want: "out2",
		},
		"a long output keeps a recent window": {
			opts:   Options{PreviewBytes: 8},
			writes: []write{out(strings.Repeat("x", 100) + "\nabc")},
			units:  100, want: "xxxx\nabc",
		},
		"rendered, a cut window starts at its first whole line": {
			opts:   Options{PreviewBytes: 8},
			writes: []write{out(strings.Repeat("x", 100) + "\nabc")},
			units:  100, render: true, want: "abc",
		},
		"rendered, a window not cut keeps its first line": {
			opts:   Options{PreviewBytes: 100},
			writes: []write{out("first\nsecond")},
			units:  100, render: true, want: "first\nsecond",
		},
		"one long last line still shows rendered": {
			opts:   Options{PreviewBytes: 100},
			writes: []write{out(`{"k":"` + strings.Repeat("v", 200) + `"}` + "\n")},
			units:  30, render: true, want: strings.Repeat("v", 27) + `"}` + "\n",
		},
		"a character cut at either end is left out": {
			opts:   Options{PreviewBytes: 5},
			writes: []write{out("éé"), out("ab\xc3")},
			units:  100, want: "éab",
			next:     out("\xa9"),
			wantNext: "abé",
		},
		"invalid bytes show as U+FFFD": {
			writes: []write{out("a\xffb")},
			units:  100, want: "a\ufffdb",
		},
		"one U+FFFD for a character's start that never ends": {
			writes: []write{out("a\xe2\x82b\xf0\x80c")},
			units:  100, want: "a\ufffdb\ufffd\ufffdc",
		},
		"a rendered tail cannot reach above its first line": {
			opts:   Options{PreviewBytes: 20},
			writes: []write{out(strings.Repeat("z", 30) + "\nkept\nlast\x1b[9A\rK")},
			units:  100, render: true, want: "Kept\nlast",
		},
		"cut in UTF-16 units": {
			writes: []write{out("a😀b")},
			units:  2, want: "b",
		},
		"a surrogate pair fits whole": {
			writes: []write{out("a😀b")},
			units:  3, want: "😀b",
		},
		"no units": {
			writes: []write{out("abc")},
			units:  0, want: "",
		},
		"after a stop, only what was kept": {
			opts:   Options{AfterStopBytes: 2},
			writes: []write{out("ab"), stop, out("cdef")},
			units:  100, want: "abcd",
		},
		"no preview": {
			opts:   Options{PreviewBytes: -1},
			writes: []write{out("abc")},
			units:  100, render: true, want: "",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o := replay(tc.opts, tc.writes)
			if diff := cmp.Diff(tc.want, o.TailText(tc.units, tc.render)); diff != "" {
				t.Errorf("TailText (-want +got):\n%s", diff)
			}
			if tc.wantNext != "" {
				o.Write(tc.next.s, []byte(tc.next.p))
				if diff := cmp.Diff(tc.wantNext, o.TailText(tc.units, tc.render)); diff != "" {
					t.Errorf("TailText after %q (-want +got):\n%s", tc.next.p, diff)
				}
			}
		})
	}
}

func TestWritten(t *testing.T) {
	o := replay(Options{HeadBytes: 2, TailBytes: 2, AfterStopBytes: 1},
		[]write{out("abcdef"), errw("12"), stop, out("xyz"), errw("!")})
	got := [2]int64{o.Written(Stdout), o.Written(Stderr)}
	if diff := cmp.Diff([2]int64{9, 3}, got); diff != "" {
		t.Errorf("Written (-want +got):\n%s", diff)
	}
}

func TestWriter(t *testing.T) {
	o := New(Options{})
	n, err := o.Writer(Stderr).Write([]byte("to stderr"))
	if n != 9 || err != nil {
		t.Errorf("Write = %d, %v; want 9, nil", n, err)
	}
	if got := o.Written(Stderr); got != 9 {
		t.Errorf("Written(Stderr) = %d, want 9", got)
	}
}

func TestChangedWakesOncePerBurst(t *testing.T) {
	o := New(Options{})
	for range 100 {
		o.Write(Stdout, []byte("x"))
	}
	select {
	case <-o.Changed():
	default:
		t.Fatal("no wake after a burst of writes")
	}
	select {
	case <-o.Changed():
		t.Fatal("a second wake for the same burst")
	default:
	}
	o.Write(Stdout, []byte("y"))
	select {
	case <-o.Changed():
	default:
		t.Fatal("no wake after a write that follows a read")
	}
	o.MarkStopped()
	o.Notify()
	select {
	case <-o.Changed():
	default:
		t.Fatal("no wake after Notify")
	}
}

func TestNothingKeptWakesNobody(t *testing.T) {
	o := New(Options{AfterStopBytes: -1})
	o.MarkStopped()
	o.Write(Stdout, []byte("dropped"))
	select {
	case <-o.Changed():
		t.Fatal("a wake for output that was not kept")
	default:
	}
}

// TestConcurrentWriters writes from many goroutines while a reader follows
// the changes; run it with -race.
func TestConcurrentWriters(t *testing.T) {
	o := New(Options{HeadBytes: 1000, TailBytes: 1000, PreviewBytes: 100})
	const writers, writes = 8, 500
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := Stream(w % 2)
			for range writes {
				o.Write(s, []byte("line é\n"))
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	for reading := true; reading; {
		select {
		case <-o.Changed():
			if got := o.TailText(50, true); len(got) > 200 {
				t.Errorf("TailText too long: %q", got)
			}
		case <-done:
			reading = false
		case <-time.After(10 * time.Second):
			t.Fatal("writers did not finish")
		}
	}
	total := o.Written(Stdout) + o.Written(Stderr)
	if want := int64(writers * writes * len("line é\n")); total != want {
		t.Errorf("Written = %d, want %d", total, want)
	}
	if final := o.FinalText(false); !strings.Contains(final, "bytes not kept") {
		t.Errorf("FinalText has no marker: %q", final)
	}
}
