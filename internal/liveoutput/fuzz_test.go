package liveoutput

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

// A plan byte says how a write goes: its length (low four bits) and its
// stream (the next bit).
func planWrites(data, plan []byte, each func(i int, s Stream, p []byte)) {
	for i := 0; len(data) > 0; i++ {
		n, s := len(data), Stdout
		if i < len(plan) {
			n = min(n, int(plan[i]&0x0F))
			s = Stream(plan[i] >> 4 & 1)
		}
		each(i, s, data[:n])
		data = data[n:]
	}
}

// modelFinal is what FinalText(false) gives for one stream that wrote all,
// with no stop.
func modelFinal(all []byte, head, tail int) string {
	if len(all) <= head {
		return DecodeEscape(all)
	}
	cut := head
	if isContinuation(all[cut]) {
		cut -= cutCharLen(all[:cut])
	}
	rest := all[cut:]
	keep := rest[max(0, len(rest)-tail):]
	if len(keep) == len(rest) {
		return DecodeEscape(all)
	}
	aligned := skipContinuations(keep)
	return DecodeEscape(all[:cut]) + notKeptLine(int64(len(rest)-len(aligned)), "") + DecodeEscape(aligned)
}

func capOption(b uint8) int {
	return int(b%40) - 1 // -1 keeps nothing, 0 takes the default
}

// FuzzCaps checks that no cap is ever exceeded, that every byte written is
// kept or counted, that the cuts never split a character of a stream that is
// UTF-8, and, with no stop, that FinalText keeps the right bytes.
func FuzzCaps(f *testing.F) {
	f.Add([]byte("0123456789abcdefKLMNOPQRST"), []byte{7, 6, 7, 10}, uint8(11), uint8(11), uint8(5), uint8(9), uint8(255), false)
	f.Add([]byte("aaé"+strings.Repeat("x", 10)+"éb"), []byte{15, 15}, uint8(4), uint8(3), uint8(0), uint8(6), uint8(255), true)
	f.Add([]byte("before\nbye!!!"), []byte{7, 0x13, 3}, uint8(0), uint8(0), uint8(5), uint8(0), uint8(1), false)
	f.Add([]byte("xa\xc3e\xa9"), []byte{1, 2, 0x11, 1}, uint8(30), uint8(30), uint8(3), uint8(30), uint8(1), false)
	f.Add([]byte("日本語のテキスト😀😀😀 and more"), []byte{1, 2, 3, 4, 5, 6, 7}, uint8(6), uint8(7), uint8(4), uint8(5), uint8(3), true)
	f.Add([]byte("\x80\x80\x80\x80\xf0\x9f\x98\x80\xe2\x82"), []byte{3, 0x12, 2, 0x11}, uint8(3), uint8(2), uint8(2), uint8(2), uint8(2), false)
	f.Fuzz(func(t *testing.T, data, plan []byte, head, tail, after, preview, stopAt uint8, oneStream bool) {
		if oneStream {
			data = []byte(strings.ToValidUTF8(string(data), "\uFFFD"))
			for i := range plan {
				plan[i] &^= 0x10
			}
		}
		o := New(Options{
			HeadBytes: capOption(head), TailBytes: capOption(tail),
			AfterStopBytes: capOption(after), PreviewBytes: capOption(preview),
		})
		var written [2][]byte
		var total, keptAtStop int64
		stopped := false
		kept := func() (n int64) {
			for i := range o.streams {
				n += int64(len(o.streams[i].head)) + o.streams[i].tail.total
			}
			return n
		}
		planWrites(data, plan, func(i int, s Stream, p []byte) {
			if i == int(stopAt) {
				o.MarkStopped()
				stopped, keptAtStop = true, kept()
			}
			o.Write(s, p)
			written[s] = append(written[s], p...)
			total += int64(len(p))

			for i := range o.streams {
				st := &o.streams[i]
				if len(st.head) > o.opts.HeadBytes || cap(st.head) > o.opts.HeadBytes {
					t.Fatalf("%v head holds %d bytes (capacity %d), cap %d", Stream(i), len(st.head), cap(st.head), o.opts.HeadBytes)
				}
				if st.tail.len() > o.opts.TailBytes || cap(st.tail.buf) > o.opts.TailBytes {
					t.Fatalf("%v tail holds %d bytes (capacity %d), cap %d", Stream(i), st.tail.len(), cap(st.tail.buf), o.opts.TailBytes)
				}
			}
			if o.preview.len() > o.opts.PreviewBytes || cap(o.preview.buf) > o.opts.PreviewBytes {
				t.Fatalf("preview holds %d bytes (capacity %d), cap %d", o.preview.len(), cap(o.preview.buf), o.opts.PreviewBytes)
			}
			if stopped && kept() > keptAtStop+int64(o.opts.AfterStopBytes) {
				t.Fatalf("%d bytes kept after the stop, cap %d", kept()-keptAtStop, o.opts.AfterStopBytes)
			}
			if got := kept() + o.notKeptAfterStop; got != total {
				t.Fatalf("kept or counted %d bytes of %d", got, total)
			}
			if w := o.Written(Stdout) + o.Written(Stderr); w != total {
				t.Fatalf("Written = %d, want %d", w, total)
			}
		})

		for i, all := range written {
			st := &o.streams[i]
			if !utf8.Valid(all) {
				continue
			}
			c := st.copy()
			var whole bool
			if c.dropped == 0 {
				whole = utf8.Valid(append(c.head, c.tail...))
			} else {
				whole = utf8.Valid(c.head) && utf8.Valid(skipContinuations(c.tail))
			}
			if !whole {
				t.Fatalf("%v: a cut splits a character: head %q, tail %q", Stream(i), c.head, c.tail)
			}
		}
		if !stopped {
			want := modelFinal(written[Stdout], o.opts.HeadBytes, o.opts.TailBytes) +
				modelFinal(written[Stderr], o.opts.HeadBytes, o.opts.TailBytes)
			if got := o.FinalText(false); got != want {
				t.Fatalf("FinalText(false)\n got %q\nwant %q", got, want)
			}
		}
		_ = o.FinalText(true)
	})
}

// FuzzTailText checks that TailText never exceeds its limit, never splits a
// character, is the end of what a larger limit gives, and reads the right
// window.
func FuzzTailText(f *testing.F) {
	f.Add([]byte("out1 err out2"), []byte{5, 0x14, 4}, uint16(4), uint8(0), false)
	f.Add([]byte(strings.Repeat("x", 100)+"\nabc"), []byte{}, uint16(100), uint8(9), true)
	f.Add([]byte("a😀b"), []byte{}, uint16(2), uint8(0), false)
	f.Add([]byte("ééab\xc3\xa9"), []byte{4, 3, 1}, uint16(100), uint8(6), false)
	f.Add([]byte(strings.Repeat("z", 30)+"\nkept\nlast\x1b[9A\rK"), []byte{}, uint16(100), uint8(21), true)
	f.Add([]byte("a\xe2\x82b\xf0\x80c\xf4\x90\xed\xa0\x80"), []byte{1, 1, 1, 1, 1, 1}, uint16(7), uint8(0), true)
	f.Fuzz(func(t *testing.T, data, plan []byte, units uint16, preview uint8, render bool) {
		o := New(Options{PreviewBytes: capOption(preview)})
		var all []byte
		planWrites(data, plan, func(_ int, s Stream, p []byte) {
			o.Write(s, p)
			all = append(all, p...)
		})
		got := o.TailText(int(units), render)
		if n := len(utf16.Encode([]rune(got))); n > int(units) {
			t.Fatalf("TailText(%d) has %d UTF-16 units: %q", units, n, got)
		}
		if !utf8.ValidString(got) {
			t.Fatalf("TailText(%d) = %q, not UTF-8", units, got)
		}
		full := o.TailText(1<<30, render)
		if !strings.HasSuffix(full, got) {
			t.Fatalf("TailText(%d) = %q, not the end of %q", units, got, full)
		}
		if !render {
			window := all[max(0, len(all)-o.opts.PreviewBytes):]
			if len(window) < len(all) {
				window = skipContinuations(window)
			}
			if want := decodeReplace(window); full != want {
				t.Fatalf("TailText = %q, want %q", full, want)
			}
			if bytes.ContainsRune([]byte(full), utf8.RuneError) && utf8.Valid(all) {
				t.Fatalf("TailText = %q has U+FFFD for UTF-8 output %q", full, all)
			}
		}
	})
}

// FuzzEscaper checks that an Escaper fed data in any pieces writes what
// DecodeEscape makes of the whole.
func FuzzEscaper(f *testing.F) {
	f.Add([]byte("ok\xff\xfe\xfdok"), []byte{1, 2, 3})
	f.Add([]byte("é€😀\xf0\x90\x80x\xe0\x80"), []byte{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1})
	f.Add([]byte("\xf0\x90"), []byte{1})
	f.Fuzz(func(t *testing.T, data, plan []byte) {
		var sb strings.Builder
		e := &Escaper{W: &sb}
		rest := data
		for _, k := range plan {
			k := min(int(k)%8, len(rest))
			if _, err := e.Write(rest[:k]); err != nil {
				t.Fatal(err)
			}
			rest = rest[k:]
		}
		if _, err := e.Write(rest); err != nil {
			t.Fatal(err)
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		if got, want := sb.String(), DecodeEscape(data); got != want {
			t.Fatalf("escaped in pieces %q, whole %q", got, want)
		}
	})
}
