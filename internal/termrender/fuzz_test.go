package termrender

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func addSeeds(f *testing.F) {
	for _, tc := range renderCases {
		f.Add(tc.in, []byte{3, 1, 4, 1, 5})
	}
	f.Add("\x1b]0;t\x1b\\\x1b[2A\r\x1b[1K\xf0\x9f\x98\x80\b\n", []byte{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1})
	f.Add("a\nb\nc\x1b[99A\x1b[2K\n\n\nz\x1b[K", []byte{0, 2, 7})
}

// FuzzRender checks that Render never panics, agrees with the model and
// gives UTF-8 whenever it renders.
func FuzzRender(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, in string, _ []byte) {
		got := Render(in)
		if want := model(in); got != want {
			t.Fatalf("Render(%q)\n got %q\nwant %q", in, got, want)
		}
		if NeedsRendering(in) && !utf8.ValidString(got) {
			t.Fatalf("Render(%q) = %q, not UTF-8", in, got)
		}
	})
}

// FuzzRendererSplit checks that rendering is the same however the input is
// split into writes, that String between writes changes nothing, and that
// what String returned never changes.
func FuzzRendererSplit(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, in string, cuts []byte) {
		var whole Renderer
		whole.WriteString(in)
		want := whole.String()
		if NeedsRendering(in) && want != Render(in) {
			t.Fatalf("one write of %q gives %q, Render gives %q", in, want, Render(in))
		}
		var pieces Renderer
		var seen, copies []string
		rest := in
		for i := 0; rest != ""; i++ {
			k := len(rest)
			if i < len(cuts) {
				k = min(k, int(cuts[i]%16))
			}
			pieces.WriteString(rest[:k])
			rest = rest[k:]
			if i%3 == 0 {
				s := pieces.String()
				seen, copies = append(seen, s), append(copies, strings.Clone(s))
			}
		}
		if got := pieces.String(); got != want {
			t.Fatalf("%q in pieces %v\n got %q\nwant %q", in, cuts, got, want)
		}
		for i := range seen {
			if seen[i] != copies[i] {
				t.Fatalf("%q in pieces %v: String's result %d changed from %q to %q", in, cuts, i, copies[i], seen[i])
			}
		}
	})
}

// FuzzStream checks that a Stream of any reach renders as the model whose
// cursor-up reaches as far, however the input is split into writes.
func FuzzStream(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, in string, cuts []byte) {
		reach := 1
		if len(cuts) > 0 {
			reach += int(cuts[0] % 8)
		}
		var out strings.Builder
		s := NewStream(&out, reach)
		rest := in
		for i := 0; rest != ""; i++ {
			k := len(rest)
			if i < len(cuts) {
				k = min(k, int(cuts[i]%16))
			}
			s.WriteString(rest[:k])
			rest = rest[k:]
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		want := modelReach(in, reach)
		if !NeedsRendering(in) {
			want = Render(in + "\r")
		}
		if got := out.String(); got != want {
			t.Fatalf("Stream(%q) reach %d in pieces %v\n got %q\nwant %q", in, reach, cuts, out.String(), want)
		}
	})
}
