// Package utf16text measures and cuts text the way Telegram counts it: in
// UTF-16 code units. Cuts never split a character; an invalid byte counts
// as U+FFFD, one unit.
package utf16text

import (
	"unicode/utf16"
	"unicode/utf8"
)

// units is how many UTF-16 units r takes; an invalid rune takes one, as the
// U+FFFD it is shown as.
func units(r rune) int {
	if u := utf16.RuneLen(r); u > 0 {
		return u
	}
	return 1
}

// Len counts the UTF-16 units of s.
func Len(s string) int {
	n := 0
	for _, r := range s {
		n += units(r)
	}
	return n
}

// Tail returns the longest end of s that has at most max UTF-16 units.
func Tail(s string, max int) string {
	used, i := 0, len(s)
	for i > 0 {
		r, size := utf8.DecodeLastRuneInString(s[:i])
		u := units(r)
		if used+u > max {
			break
		}
		used += u
		i -= size
	}
	return s[i:]
}

// Head returns the longest start of s that has at most max UTF-16 units.
func Head(s string, max int) string {
	used := 0
	for i, r := range s {
		u := units(r)
		if used+u > max {
			return s[:i]
		}
		used += u
	}
	return s
}
