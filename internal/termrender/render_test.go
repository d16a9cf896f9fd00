package termrender

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
)

// renderCases are inputs and what a terminal shows of them, as the reference
// renders them.
var renderCases = map[string]struct {
	in, want string
}{
	// The reference's own examples.
	"carriage return overwrites": {in: "abcdef\rXY", want: "XYcdef"},
	"newline makes a new line":   {in: "a\nb\n", want: "a\nb\n"},
	"backspace moves back one":   {in: "abc\b\bX", want: "aXc"},
	"backspace stops at column 0": {
		in: "ab\b\b\b\b\bX", want: "Xb",
	},
	"SGR is removed": {
		in: "\x1b[1;31mred\x1b[0m and \x1b[38;5;208mamber\x1b[m", want: "red and amber",
	},
	"erase to end of line": {in: "abcdef\rab\x1b[K", want: "ab"},
	"erase to end, mode 0": {in: "abcdef\rabc\x1b[0K", want: "abc"},
	"erase to end at the end is nothing": {
		in: "abc\x1b[K", want: "abc",
	},
	"erase start through cursor": {in: "abcdef\rab\x1b[1K", want: "   def"},
	"erase start past the end blanks the line": {
		in: "ab\nlonger\x1b[A\x1b[1K", want: "  \nlonger",
	},
	"erase whole line empties it": {in: "abcdef\x1b[2Kxy", want: "      xy"},
	"erase mode 3 does nothing":   {in: "abcdef\r\x1b[3K", want: "abcdef"},
	"cursor up":                   {in: "a\nb\nc\x1b[2A\rX", want: "X\nb\nc"},
	"cursor up defaults to one":   {in: "a\nb\x1b[A\rX", want: "X\nb"},
	"cursor up zero moves one":    {in: "a\nb\x1b[0A\rX", want: "X\nb"},
	"cursor up never above the first line": {
		in: "a\nb\x1b[99A\rX", want: "X\nb",
	},
	"cursor up a huge count": {
		in: "a\nb\x1b[99999999999999999999999A\rX", want: "X\nb",
	},
	"cursor up keeps the column and pads": {
		in: "ab\nlong line\x1b[AX", want: "ab       X\nlong line",
	},
	"newline after cursor up moves onto the next line": {
		in: "one\ntwo\nthree\x1b[2A\nTW", want: "one\nTWo\nthree",
	},
	"private parameter ignored for K": {in: "abc\r\x1b[?2K", want: "abc"},
	"private parameter ignored for A": {in: "a\nb\x1b[?1A\rX", want: "a\nX"},
	"multi-part parameter ignored for A": {
		in: "a\nb\x1b[1;2A\rX", want: "a\nX",
	},
	"multi-part parameter ignored for K": {in: "abc\r\x1b[0;1K", want: "abc"},
	"leading zeros":                      {in: "abcdef\rab\x1b[001K", want: "   def"},
	"other CSI dropped": {
		in: "\x1b[2J\x1b[Habc\x1b[5C\x1b[3D\x1b[?25l!\x1b[?25h", want: "abc!",
	},
	"OSC title ended by BEL": {in: "\x1b]0;my title\x07text", want: "text"},
	"OSC hyperlink ended by ST": {
		in: "see \x1b]8;;https://example.com/\x1b\\the link\x1b]8;;\x1b\\.", want: "see the link.",
	},
	"OSC holds carriage returns": {in: "ab\x1b]2;x\ry\x07c", want: "abc"},
	"a long OSC string": {
		in: "a\x1b]1337;File=inline=1:" + strings.Repeat("QUJD\b", 1000) + "\x07b", want: "ab",
	},
	"ESC ( B as tput sgr0 writes it": {
		in: "\x1b[1mbold\x1b(B\x1b[m plain", want: "bold plain",
	},
	"short escape sequences dropped": {
		in: "a\x1b7b\x1b8c\x1bMd\x1b=e\x1b#8f", want: "abcdef",
	},
	"CRLF is a newline": {in: "one\r\ntwo\r\n", want: "one\ntwo\n"},
	"spinner of backspaces": {
		in: "working |\b/\b-\b\\\b|\bdone", want: "working done",
	},
	"wide characters are one column each": {
		in: "日本語です\rＸ", want: "Ｘ本語です",
	},
	"emoji are one column each": {in: "😀😀\b!", want: "😀!"},
	"an emoji modifier is a character of its own": {
		in: "👍🏽\bX", want: "👍X",
	},
	"tabs are one column": {in: "a\tb\rX", want: "X\tb"},
	"an overwritten line left and come back to": {
		in: "éa\rb\nxy\x1b[A\rZ\n\n\x1b[2A\x1b[K", want: "\nxy\n",
	},
	"combining marks are one column": {
		in: "e\u0301a\rE", want: "E\u0301a",
	},
	"multi-bar progress redrawn with cursor-up": {
		in: "\r  0%|          | 0/10\n\r  0%|          | 0/20\x1b[A" +
			"\r 50%|█████     | 5/10\n\r 25%|██▌       | 5/20\x1b[A" +
			"\r100%|██████████| 10/10\n\r100%|██████████| 20/20\x1b[A" +
			"\n\n",
		want: "100%|██████████| 10/10\n100%|██████████| 20/20\n",
	},
	"tqdm frames then a newline": {
		in:   "\r  0%|          | 0/3 [00:00<?, ?it/s]\r 33%|███▎      | 1/3 [00:00<00:00,  9.8it/s]\r100%|██████████| 3/3 [00:00<00:00,  9.9it/s]\n",
		want: "100%|██████████| 3/3 [00:00<00:00,  9.9it/s]\n",
	},
	"a shorter frame leaves the end of a longer one": {
		in: "downloading 100 files\rdone", want: "doneloading 100 files",
	},
	"a shorter frame erased with K": {
		in: "downloading 100 files\rdone\x1b[K", want: "done",
	},
	"grep colours": {
		in:   "\x1b[35m\x1b[Kmain.go\x1b[m\x1b[K\x1b[36m\x1b[K:\x1b[m\x1b[K\x1b[32m\x1b[K12\x1b[m\x1b[K\x1b[36m\x1b[K:\x1b[m\x1b[K\tfunc \x1b[01;31m\x1b[Kmain\x1b[m\x1b[K() {\n",
		want: "main.go:12:\tfunc main() {\n",
	},
	"unfinished CSI at the end is dropped":  {in: "abc\x1b[3", want: "abc"},
	"unfinished OSC at the end is dropped":  {in: "abc\x1b]0;ti", want: "abc"},
	"lone ESC at the end is dropped":        {in: "abc\x1b", want: "abc"},
	"unfinished CSI before a newline":       {in: "ab\x1b[12\ncd", want: "ab\ncd"},
	"unfinished CSI before other text":      {in: "a\x1b[1é", want: "aé"},
	"unfinished OSC before a newline":       {in: "a\x1b]title\nb", want: "a\nb"},
	"OSC cut by another escape sequence":    {in: "ab\x1b]0;t\x1b[2Kc", want: "  c"},
	"CSI with an intermediate byte applies": {in: "abc\r\x1b[2 K", want: ""},
	"CSI cut by a parameter byte after an intermediate": {
		in: "ab\x1b[1 2m", want: "ab2m",
	},
	"other control characters are text": {in: "a\x00b\x07c", want: "a\x00b\x07c"},
	"invalid UTF-8 becomes U+FFFD":      {in: "a\xffb\r", want: "a\ufffdb"},
	"invalid UTF-8 with no control is kept": {
		in: "a\xffb", want: "a\xffb",
	},
	"empty": {in: "", want: ""},
	"only controls": {
		in: "\r\b\x1b[K", want: "",
	},
}

func TestRender(t *testing.T) {
	for name, tc := range renderCases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Render(tc.in)); diff != "" {
				t.Errorf("Render(%q) (-want +got):\n%s", tc.in, diff)
			}
			if diff := cmp.Diff(tc.want, model(tc.in)); diff != "" {
				t.Errorf("model(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestRenderReturnsTextWithoutControlsAsIs(t *testing.T) {
	in := strings.Repeat("plain line\n", 10)
	if got := Render(in); unsafe.StringData(got) != unsafe.StringData(in) {
		t.Errorf("Render copied a text that needs no rendering")
	}
}

// TestRendererAnySplit writes every case in every split into two writes,
// and in single bytes.
func TestRendererAnySplit(t *testing.T) {
	for name, tc := range renderCases {
		t.Run(name, func(t *testing.T) {
			for cut := 0; cut <= len(tc.in); cut++ {
				var r Renderer
				r.WriteString(tc.in[:cut])
				r.WriteString(tc.in[cut:])
				if got := r.String(); got != tc.want && NeedsRendering(tc.in) {
					t.Errorf("split at %d: got %q, want %q", cut, got, tc.want)
				}
			}
			var r Renderer
			for i := range len(tc.in) {
				r.Write([]byte{tc.in[i]})
			}
			if got := r.String(); got != tc.want && NeedsRendering(tc.in) {
				t.Errorf("byte by byte: got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRendererSequenceSplitAcrossWrites(t *testing.T) {
	tests := map[string]struct {
		writes []string
		want   string
	}{
		"CSI cut after ESC": {
			writes: []string{"50%\r\x1b", "[K100%"}, want: "100%",
		},
		"CSI cut in its parameter": {
			writes: []string{"a\nb\nc\x1b[", "2", "A\rX"}, want: "X\nb\nc",
		},
		"OSC cut in its string and before ST's backslash": {
			writes: []string{"\x1b]0;ti", "tle\x1b", "\\text"}, want: "text",
		},
		"ESC ( B cut in two": {writes: []string{"x\x1b(", "By"}, want: "xy"},
		"character cut in three": {
			writes: []string{"\xf0\x9f", "\x98", "\x80\b!"}, want: "!",
		},
		"character cut before a backspace": {
			writes: []string{"ab\xc3", "\xa9\b\bX"}, want: "aXé",
		},
		"cut character that never completes": {
			writes: []string{"ab\xe2\x82", "\rX"}, want: "Xb\ufffd\ufffd",
		},
		"unfinished at the very end": {
			writes: []string{"done\r", "\x1b[1"}, want: "done",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var r Renderer
			for _, w := range tc.writes {
				r.WriteString(w)
			}
			if diff := cmp.Diff(tc.want, r.String()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestRendererStringsStay checks that a later write never changes what
// String returned, whatever the write does to the line.
func TestRendererStringsStay(t *testing.T) {
	var r Renderer
	var got, want []string
	in := ""
	for _, w := range []string{
		// Rendered shorter than it is, so that later writes fit in buf.
		strings.Repeat("x", 400) + "\r" + strings.Repeat("abcdefgh", 75),
		"\rXY", "\x1b[1K", "\x1b[K", "\x1b[2K",
		"tail é", "\r日本", "\nnext line\x1b[A", "\rover\n", "end",
	} {
		r.WriteString(w)
		in += w
		got = append(got, r.String())
		want = append(want, model(in))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("String after each write (-want +got):\n%s", diff)
	}
}

// TestRendererStringMidway checks that String does not disturb what follows.
func TestRendererStringMidway(t *testing.T) {
	var r Renderer
	r.WriteString("ab\xc3")
	if diff := cmp.Diff("ab\ufffd", r.String()); diff != "" {
		t.Errorf("with a cut character (-want +got):\n%s", diff)
	}
	r.WriteString("\xa9 \x1b[3")
	if diff := cmp.Diff("abé ", r.String()); diff != "" {
		t.Errorf("with a cut sequence (-want +got):\n%s", diff)
	}
	r.WriteString("1mred\x1b[0m")
	if diff := cmp.Diff("abé red", r.String()); diff != "" {
		t.Errorf("at the end (-want +got):\n%s", diff)
	}
}

func TestLineAligned(t *testing.T) {
	tests := map[string]struct {
		in, want string
	}{
		"no newline":               {in: "the end of a long line", want: "the end of a long line"},
		"cut at the first newline": {in: "ial line\nwhole\nlast", want: "whole\nlast"},
		"a newline first":          {in: "\nwhole", want: "whole"},
		"only a newline after":     {in: `"v"}` + "\n", want: `"v"}` + "\n"},
		"only blanks after":        {in: "end\n  \n\t \r", want: "end\n  \n\t \r"},
		"information separators are blanks": {
			in: "end\n\x1c\x1f", want: "end\n\x1c\x1f",
		},
		"Unicode blanks":             {in: "end\n\u00a0\u3000\u2028", want: "end\n\u00a0\u3000\u2028"},
		"a control that is no blank": {in: "end\n\x00", want: "\x00"},
		"empty":                      {in: "", want: ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, LineAligned(tc.in)); diff != "" {
				t.Errorf("LineAligned(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

// pieces are what random outputs are made of: text of every width, every
// control and escape sequence the renderer knows, and the ones it drops.
var pieces = []string{
	"a", "bc", "xyz ", "é", "日本", "😀", "\u0301", " ", "\t", "\x00",
	"\xff", "\xc3", "\xe2\x82",
	"\n", "\r", "\r\n", "\b", "\b\b",
	"\x1b[K", "\x1b[0K", "\x1b[1K", "\x1b[2K", "\x1b[3K", "\x1b[A", "\x1b[2A",
	"\x1b[0A", "\x1b[?1A", "\x1b[1;2K", "\x1b[31m", "\x1b[0m", "\x1b[m",
	"\x1b[2J", "\x1b[5C", "\x1b[2 K", "\x1b]0;title\x07", "\x1b]8;;u\x1b\\",
	"\x1b(B", "\x1b7", "\x1b", "\x1b[", "\x1b[1", "\x1b]", "\x1b(",
	strings.Repeat("long", 40),
}

func randomOutput(rng *rand.Rand, n int) string {
	var sb strings.Builder
	for range n {
		sb.WriteString(pieces[rng.IntN(len(pieces))])
	}
	return sb.String()
}

// TestRenderMatchesModel compares the renderer with the model on random
// outputs, written whole and in random pieces.
func TestRenderMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		in := randomOutput(rng, 1+rng.IntN(60))
		want := model(in)
		if got := Render(in); got != want {
			t.Fatalf("case %d: Render(%q)\n got %q\nwant %q", i, in, got, want)
		}
		var r Renderer
		for rest := in; rest != ""; {
			k := min(len(rest), rng.IntN(8))
			r.WriteString(rest[:k])
			rest = rest[k:]
		}
		if got := r.String(); got != want && NeedsRendering(in) {
			t.Fatalf("case %d: in pieces %q\n got %q\nwant %q", i, in, got, want)
		}
	}
}

// TestRendererManyLinesInTurn rewrites more lines in turn than stay active,
// so lines go back to bytes and come back.
func TestRendererManyLinesInTurn(t *testing.T) {
	var sb strings.Builder
	for i := range 40 {
		sb.WriteString("line é ")
		sb.WriteString(strings.Repeat("x", i))
		sb.WriteString("\n")
	}
	for round := range 5 {
		for i := range 40 {
			sb.WriteString("\x1b[40A")
			sb.WriteString(strings.Repeat("\n", i))
			sb.WriteString("\r")
			sb.WriteString(strings.Repeat("ü", round+i%3))
			if i%4 == 0 {
				sb.WriteString("\x1b[K")
			}
		}
	}
	in := sb.String()
	if diff := cmp.Diff(model(in), Render(in)); diff != "" {
		t.Errorf("(-model +Render):\n%s", diff)
	}
}
