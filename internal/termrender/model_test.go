package termrender

import (
	"regexp"
	"strconv"
	"strings"
)

// modelToken matches, in order of preference: a CSI sequence (parameters,
// intermediates, final if it came), an OSC string (its end if it came), a
// short escape sequence (its final if it came), '\r' or '\b'.
var modelToken = regexp.MustCompile(
	`\x1b\[([0-?]*)[ -/]*([@-~])?` +
		`|\x1b\][^\x07\x1b]*(\x07|\x1b\\)?` +
		`|\x1b[ -/]*([0-~])?` +
		`|[\r\x08]`)

// model renders text the slow and obvious way, with every line a slice of
// code points, for the tests to compare the Renderer with.
func model(text string) string { return modelReach(text, 0) }

// modelReach is model with a cursor-up that reaches at most reach lines
// above the last line, as a Stream's does; 0 is no bound.
func modelReach(text string, reach int) string {
	if !NeedsRendering(text) {
		return text
	}
	text = string([]rune(text)) // each byte that is not UTF-8 becomes U+FFFD
	lines := [][]rune{nil}
	row, col := 0, 0
	write := func(s string) {
		if s == "" {
			return
		}
		ln := lines[row]
		for len(ln) < col {
			ln = append(ln, ' ')
		}
		for _, c := range s {
			if col < len(ln) {
				ln[col] = c
			} else {
				ln = append(ln, c)
			}
			col++
		}
		lines[row] = ln
	}
	for i, segment := range strings.Split(text, "\n") {
		if i > 0 {
			row, col = row+1, 0
			if row == len(lines) {
				lines = append(lines, nil)
			}
		}
		pos := 0
		for _, m := range modelToken.FindAllStringSubmatchIndex(segment, -1) {
			write(segment[pos:m[0]])
			pos = m[1]
			switch token := segment[m[0]:m[1]]; {
			case token == "\r":
				col = 0
			case token == "\b":
				col = max(0, col-1)
			case strings.HasPrefix(token, "\x1b[") && m[4] >= 0:
				params, final := segment[m[2]:m[3]], segment[m[4]]
				if final != 'A' && final != 'K' {
					continue
				}
				n := 0
				if params != "" {
					if strings.Trim(params, "0123456789") != "" {
						continue
					}
					params = strings.TrimLeft(params, "0")
					if len(params) > 9 {
						params = "999999999"
					}
					n, _ = strconv.Atoi("0" + params)
				}
				if final == 'A' {
					top := 0
					if reach > 0 {
						top = max(0, len(lines)-1-reach)
					}
					row = max(top, row-max(n, 1))
					continue
				}
				ln := lines[row]
				switch n {
				case 0:
					if col < len(ln) {
						ln = ln[:col]
					}
				case 1:
					for j := 0; j < len(ln) && j <= col; j++ {
						ln[j] = ' '
					}
				case 2:
					ln = nil
				}
				lines[row] = ln
			}
		}
		write(segment[pos:])
	}
	out := make([]string, len(lines))
	for i, ln := range lines {
		out[i] = string(ln)
	}
	return strings.Join(out, "\n")
}
