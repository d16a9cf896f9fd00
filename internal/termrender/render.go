package termrender

import (
	"strings"
	"unicode"
)

// Render returns text as a terminal would show it; see the package
// documentation. Text with no '\r', '\b' or ESC is returned unchanged.
// Otherwise each byte that is not UTF-8 becomes U+FFFD, and an escape
// sequence still unfinished at the end is dropped.
func Render(text string) string {
	if !NeedsRendering(text) {
		return text
	}
	var r Renderer
	r.WriteString(text)
	return r.String()
}

// NeedsRendering reports whether text holds a '\r', '\b' or ESC, the only
// bytes that make Render change it.
func NeedsRendering(text string) bool {
	return strings.IndexByte(text, 0x1b) >= 0 ||
		strings.IndexByte(text, '\r') >= 0 ||
		strings.IndexByte(text, '\b') >= 0
}

// LineAligned returns text from the start of its first whole line: what
// follows its first '\n'. A tail cut from a longer output usually starts in
// the middle of a line, where a '\r' or a cursor-up would act on text that
// is not there; aligned, rendering stays inside the tail.
//
// Text with no '\n' is returned whole, and so is text where only blanks
// follow the first '\n' (the end of one long line, such as a minified JSON
// body), so that a preview never goes empty.
func LineAligned(text string) string {
	i := strings.IndexByte(text, '\n')
	if i < 0 {
		return text
	}
	rest := text[i+1:]
	if strings.TrimFunc(rest, isBlank) == "" {
		return text
	}
	return rest
}

// isBlank reports whether c is white space as the reference counts it
// (Python's str.isspace): Unicode's white space plus the information
// separators U+001C to U+001F.
func isBlank(c rune) bool {
	return unicode.IsSpace(c) || c >= 0x1c && c <= 0x1f
}
