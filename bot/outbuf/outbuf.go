// Package outbuf is the bot's copy of a running command's output, read from
// the agent's spool: what it needs for a preview (the recent end) and for
// the final (the whole output, within the spool's own caps).
//
// It has the API of internal/liveoutput that the bot reads (TailText,
// FinalText), for the single merged stream that the agent's spool holds.
package outbuf

import (
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"shelljob.dev/shelljob/bot/preview"
	"shelljob.dev/shelljob/internal/termrender"
)

const (
	// HeadBytes and TailBytes cap what is kept for the final, as the spool
	// does: the first and the last 16 MiB, with a line between them saying
	// how much was dropped.
	HeadBytes = 16 << 20
	TailBytes = 16 << 20
	// RecentBytes is the window a preview is cut from: the last 16 KiB.
	RecentBytes = 16 << 10
)

// Buffer collects output. Write may be called from any goroutine; Changed
// wakes one reader after writes.
type Buffer struct {
	mu      sync.Mutex
	head    []byte
	tail    []byte // ring-less: trimmed to TailBytes on growth
	dropped int64
	total   int64
	changed chan struct{}
}

// New returns an empty Buffer.
func New() *Buffer { return &Buffer{changed: make(chan struct{}, 1)} }

// Write appends p. It never fails and never blocks.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	b.total += int64(len(p))
	q := p
	if room := HeadBytes - len(b.head); room > 0 {
		n := min(room, len(q))
		b.head = append(b.head, q[:n]...)
		q = q[n:]
	}
	if len(q) > 0 {
		b.tail = append(b.tail, q...)
		if over := len(b.tail) - TailBytes; over > 0 {
			b.dropped += int64(over)
			b.tail = append(b.tail[:0:0], b.tail[over:]...)
		}
	}
	b.mu.Unlock()
	select {
	case b.changed <- struct{}{}:
	default:
	}
	return len(p), nil
}

// Changed is signalled after writes, at most one wake pending.
func (b *Buffer) Changed() <-chan struct{} { return b.changed }

// Len is the number of bytes written so far: the offset to resume from.
func (b *Buffer) Len() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total
}

// recent returns the last RecentBytes and whether anything came before.
func (b *Buffer) recent() ([]byte, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	all := b.tail
	if len(all) < RecentBytes {
		h := b.head[max(0, len(b.head)-(RecentBytes-len(all))):]
		all = append(append([]byte(nil), h...), all...)
	} else {
		all = append([]byte(nil), all[len(all)-RecentBytes:]...)
	}
	return all, b.total > int64(len(all))
}

// TailText is the end of the output for a preview, at most maxUnits UTF-16
// units. Invalid bytes show as U+FFFD, and a character cut at the start of
// the window is left out. With render, a window cut from a longer output
// starts at its first whole line and is rendered as a terminal would.
func (b *Buffer) TailText(maxUnits int, render bool) string {
	raw, cut := b.recent()
	if cut {
		for i := 0; i < utf8.UTFMax && len(raw) > 0 && !utf8.RuneStart(raw[0]); i++ {
			raw = raw[1:]
		}
	}
	// A character still being written at the end waits for its rest.
	if n := cutAtEnd(raw); n > 0 {
		raw = raw[:len(raw)-n]
	}
	text := replaceInvalid(raw)
	if render {
		if cut {
			text = termrender.LineAligned(text)
		}
		text = termrender.Render(text)
	}
	return preview.Tail(text, maxUnits)
}

// cutAtEnd returns the length of an incomplete UTF-8 character at the end.
func cutAtEnd(p []byte) int {
	for i := 1; i <= utf8.UTFMax && i <= len(p); i++ {
		c := p[len(p)-i]
		if utf8.RuneStart(c) {
			if !utf8.FullRune(p[len(p)-i:]) {
				return i
			}
			return 0
		}
	}
	return 0
}

// FinalText is the whole output kept, for the final. Invalid bytes become
// \xNN escapes. With render it is rendered as a terminal would show it.
func (b *Buffer) FinalText(render bool) string {
	b.mu.Lock()
	var sb strings.Builder
	sb.WriteString(Escape(b.head))
	if b.dropped > 0 {
		fmt.Fprintf(&sb, "\n[… %d bytes not kept …]\n", b.dropped)
	}
	sb.WriteString(Escape(b.tail))
	b.mu.Unlock()
	text := sb.String()
	if render {
		text = termrender.Render(text)
	}
	return text
}

// Escape decodes p as UTF-8, writing each invalid byte as \xNN.
func Escape(p []byte) string {
	if utf8.Valid(p) {
		return string(p)
	}
	var sb strings.Builder
	for len(p) > 0 {
		r, size := utf8.DecodeRune(p)
		if r == utf8.RuneError && size <= 1 {
			fmt.Fprintf(&sb, `\x%02x`, p[0])
			p = p[1:]
			continue
		}
		sb.Write(p[:size])
		p = p[size:]
	}
	return sb.String()
}

// replaceInvalid decodes p as UTF-8, each invalid byte as U+FFFD.
func replaceInvalid(p []byte) string {
	if utf8.Valid(p) {
		return string(p)
	}
	var sb strings.Builder
	for len(p) > 0 {
		r, size := utf8.DecodeRune(p)
		sb.WriteRune(r)
		p = p[size:]
	}
	return sb.String()
}
