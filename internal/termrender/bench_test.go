package termrender

import (
	"fmt"
	"strings"
	"testing"
)

const mib = 1 << 20

// BenchmarkRender renders about 1 MiB of each kind of output that the
// reference measured, written whole into a Renderer, as a final is.
// hack/bench.sh turns the figures into MiB/s beside the reference's.
func BenchmarkRender(b *testing.B) {
	for _, bc := range []struct {
		name string
		in   string
	}{
		{"ordinary_lines", ordinaryLines()},
		{"tqdm_frames", tqdmFrames()},
		{"coloured_lines", colouredLines()},
		{"long_grep_line", longGrepLine()},
		{"long_jq_line", longJQLine()},
		{"redraws_over_1MiB_line", redrawsOverLongLine()},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.in)))
			b.ReportAllocs()
			for b.Loop() {
				var r Renderer
				r.WriteString(bc.in)
				_ = r.String()
			}
		})
	}
}

// BenchmarkRendererStream writes the same outputs in 4 KiB pieces, as a
// program's output arrives.
func BenchmarkRendererStream(b *testing.B) {
	for _, bc := range []struct {
		name string
		in   string
	}{
		{"ordinary_lines", ordinaryLines()},
		{"tqdm_frames", tqdmFrames()},
		{"coloured_lines", colouredLines()},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.in)))
			for b.Loop() {
				var r Renderer
				for rest := bc.in; rest != ""; {
					k := min(len(rest), 4096)
					r.WriteString(rest[:k])
					rest = rest[k:]
				}
				_ = r.String()
			}
		})
	}
}

// ordinaryLines is a service log: lines of 90 to 120 bytes, no controls.
func ordinaryLines() string {
	var sb strings.Builder
	for i := 0; sb.Len() < mib; i++ {
		fmt.Fprintf(&sb, "2026-07-01T12:%02d:%02d.%03dZ INFO request served method=GET path=/api/v1/items/%d status=200 bytes=%d dur=%dms\n",
			i/60%60, i%60, i%1000, i*7919%100000, i*31%65536, i%250)
	}
	return sb.String()
}

// tqdmFrames is tqdm's output without a terminal: a frame after each '\r',
// a bar of eighth blocks, a newline when a bar is done.
func tqdmFrames() string {
	const total, width = 500, 10
	blocks := []rune(" ▏▎▍▌▋▊▉█")
	var sb strings.Builder
	for i := 0; sb.Len() < mib; i++ {
		n := i % (total + 1)
		eighths := n * width * 8 / total
		bar := strings.Repeat("█", eighths/8)
		if len(bar)/3 < width {
			bar += string(blocks[eighths%8]) + strings.Repeat(" ", width-eighths/8-1)
		}
		fmt.Fprintf(&sb, "\r%3d%%|%s| %d/%d [00:%02d<00:%02d, %6.2fit/s]",
			n*100/total, bar, n, total, n/60, (total-n)/60, 123.45+float64(n%7))
		if n == total {
			sb.WriteString("\n")
		}
	}
	return sb.String()
}

// colouredLines is grep --color=always -n -H output.
func colouredLines() string {
	var sb strings.Builder
	for i := 0; sb.Len() < mib; i++ {
		fmt.Fprintf(&sb, "\x1b[35m\x1b[Kpkg/server/handler_%d.go\x1b[m\x1b[K\x1b[36m\x1b[K:\x1b[m\x1b[K\x1b[32m\x1b[K%d\x1b[m\x1b[K\x1b[36m\x1b[K:\x1b[m\x1b[K\tif err := \x1b[01;31m\x1b[Kvalidate\x1b[m\x1b[K(ctx, req); err != nil {\n",
			i%97, i*13%2000+1)
	}
	return sb.String()
}

// longGrepLine is one line of grep --color=always matches, as in a
// minified file.
func longGrepLine() string {
	var sb strings.Builder
	for i := 0; sb.Len() < mib; i++ {
		fmt.Fprintf(&sb, "var a%d=\x1b[01;31m\x1b[Kfunction\x1b[m\x1b[K(b){return b+%d};", i, i%10)
	}
	sb.WriteString("\n")
	return sb.String()
}

// longJQLine is one line of jq -C -c output.
func longJQLine() string {
	var sb strings.Builder
	sb.WriteString("\x1b[1;39m[")
	for i := 0; sb.Len() < mib; i++ {
		if i > 0 {
			sb.WriteString("\x1b[1;39m,")
		}
		fmt.Fprintf(&sb, "\x1b[1;39m{\x1b[0m\x1b[34;1m\"id\"\x1b[0m\x1b[1;39m:\x1b[0;39m%d\x1b[0m\x1b[1;39m,\x1b[0m\x1b[34;1m\"name\"\x1b[0m\x1b[1;39m:\x1b[0;32m\"item %d\"\x1b[0m\x1b[1;39m,\x1b[0m\x1b[34;1m\"ok\"\x1b[0m\x1b[1;39m:\x1b[0;39mtrue\x1b[0m\x1b[1;39m\x1b[1;39m}\x1b[0m", i, i)
	}
	sb.WriteString("\x1b[1;39m]\x1b[0m\n")
	return sb.String()
}

// redrawsOverLongLine is a line of 1 MiB with no newline, then 2000 redraws
// of a two-bar progress display: the first bar overwrites the start of the
// long line, the second is drawn under it, and a cursor-up goes back.
func redrawsOverLongLine() string {
	var sb strings.Builder
	sb.WriteString(strings.Repeat("0123456789abcdef", mib/16))
	for i := range 2000 {
		done := i * 10 / 2000
		fmt.Fprintf(&sb, "\rfiles %3d%%|%s%s|\n\rbytes %3d%%|%s%s|\x1b[A",
			i/20, strings.Repeat("█", done), strings.Repeat(" ", 10-done),
			i/20, strings.Repeat("█", done), strings.Repeat(" ", 10-done))
	}
	sb.WriteString("\n\n")
	return sb.String()
}

func TestBenchmarkInputs(t *testing.T) {
	for name, in := range map[string]string{
		"tqdm":     tqdmFrames(),
		"coloured": colouredLines(),
		"grep":     longGrepLine(),
		"jq":       longJQLine(),
		"redraws":  redrawsOverLongLine(),
	} {
		if got, want := Render(in), model(in); got != want {
			t.Errorf("%s: Render and the model differ", name)
		}
	}
}
