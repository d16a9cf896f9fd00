package longoutput

import (
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"shelljob.dev/shelljob/bot/preview"
	"shelljob.dev/shelljob/internal/liveoutput"
	"shelljob.dev/shelljob/internal/termrender"
	"shelljob.dev/shelljob/internal/utf16text"
)

// inMemory is what a final shows of data, built in memory as for a short
// output.
func inMemory(data []byte, render bool) string {
	text := liveoutput.DecodeEscape(data)
	if render {
		text = termrender.Render(text)
	}
	return strings.TrimSpace(preview.Clean(text))
}

// keep measures the final text of data, which its source makes as the
// agent does (liveoutput.NewFinalWriter), from data written in pieces of
// the plan's sizes.
func keep(t *testing.T, data, plan []byte, render bool) *Output {
	t.Helper()
	o, err := Measure(func(w io.Writer) error {
		text := liveoutput.NewFinalWriter(w, render)
		rest := data
		for _, k := range plan {
			k := min(int(k), len(rest))
			if _, err := text.Write(rest[:k]); err != nil {
				return err
			}
			rest = rest[k:]
		}
		if _, err := text.Write(rest); err != nil {
			return err
		}
		return text.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func check(t *testing.T, o *Output, want string) {
	t.Helper()
	got, err := o.String()
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("kept %q, want %q", got, want)
	}
	if o.Size() != int64(len(want)) {
		t.Errorf("Size %d, want %d", o.Size(), len(want))
	}
	if n := int64(utf8.RuneCountInString(want)); o.Runes() != n {
		t.Errorf("Runes %d, want %d", o.Runes(), n)
	}
	if o.Empty() != (want == "") {
		t.Errorf("Empty %v for %q", o.Empty(), want)
	}
	for _, units := range []int{0, 1, 2, 5, 4096} {
		if tail, w := o.Tail(units), utf16text.Tail(want, units); tail != w {
			t.Errorf("Tail(%d) %q, want %q", units, tail, w)
		}
	}
}

func TestMeasure(t *testing.T) {
	for _, tc := range []struct {
		name   string
		data   string
		render bool
	}{
		{"empty", "", false},
		{"blank", " \n\t\r\n ", false},
		{"plain", "  hello\nworld\n\n", false},
		{"invalid UTF-8", "\xff\xfe\xfdok\xf0\x90", false},
		{"NUL", "a\x00b\x00\n", false},
		{"wide", " 😀é€\u2028x\u00a0", false},
		{"rendered", "10%\r50%\r100%\n\x1b[31mred\x1b[0m\n", true},
		{"not rendered", "10%\r100%\n", false},
		{"rendered binary", "\xff\r\x1b[1A\x1b[2K\xfe\x00\n\b\bz", true},
		{"rendered long lines", strings.Repeat("0123456789", 20000) + "\r" + strings.Repeat("ab\x1b[K\n", 20000), true},
		{"long", strings.Repeat("y\n", 100000), false},
		{"long white space after", "x" + strings.Repeat("\n", 50000), false},
		{"long white space inside", "x" + strings.Repeat(" ", 50000) + "y\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, plan := range [][]byte{nil, {1, 1, 1, 1, 1, 1, 1, 1}, {3, 2, 5}} {
				check(t, keep(t, []byte(tc.data), plan, tc.render), inMemory([]byte(tc.data), tc.render))
			}
		})
	}
}

func TestReaderShowsNULsAcrossReads(t *testing.T) {
	data := strings.Repeat("a\x00", 40000)
	o := keep(t, []byte(data), nil, false)
	var sb strings.Builder
	buf := make([]byte, 7)
	if _, err := io.CopyBuffer(&sb, struct{ io.Reader }{o.Reader()}, buf); err != nil {
		t.Fatal(err)
	}
	if want := inMemory([]byte(data), false); sb.String() != want {
		t.Fatalf("read %d bytes, want %d", sb.Len(), len(want))
	}
}

func FuzzMeasure(f *testing.F) {
	f.Add([]byte(" ok\xff\x00 \r\n"), []byte{1, 2}, false)
	f.Add([]byte("\x1b[2Kab\rc\n\u3000"), []byte{3}, true)
	f.Fuzz(func(t *testing.T, data, plan []byte, render bool) {
		check(t, keep(t, data, plan, render), inMemory(data, render))
	})
}

// Closing a Reader ends the spool's second read, and a second read that
// ends early is an error, not a short file.
func TestReaderSecondRead(t *testing.T) {
	calls, ended := 0, make(chan error, 1)
	o, err := Measure(func(w io.Writer) error {
		calls++
		if calls == 1 {
			_, err := io.WriteString(w, strings.Repeat("y\n", 1<<20))
			return err
		}
		for {
			if _, err := io.WriteString(w, "y\n"); err != nil {
				ended <- err
				return err
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	r := o.Reader()
	if _, err := io.ReadFull(r, make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if err := <-ended; err == nil {
		t.Fatal("the read went on after Close")
	}

	short, err := Measure(func(w io.Writer) error {
		calls++
		_, err := io.WriteString(w, strings.Repeat("x", 100-calls))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if s, err := short.String(); err == nil {
		t.Fatalf("a second read that ended early gave %d bytes and no error", len(s))
	}
}
