package outbuf

import (
	"strings"
	"testing"
)

func TestFinalEscapesInvalidBytes(t *testing.T) {
	b := New()
	b.Write([]byte("ok \xff\xfe é\n"))
	if got, want := b.FinalText(false), `ok \xff\xfe é`+"\n"; got != want {
		t.Errorf("FinalText = %q, want %q", got, want)
	}
	if got := b.TailText(100, false); got != "ok \uFFFD\uFFFD é\n" {
		t.Errorf("TailText = %q", got)
	}
}

func TestTailRendersAligned(t *testing.T) {
	b := New()
	b.Write([]byte(strings.Repeat("x", RecentBytes)))
	b.Write([]byte("\r10%\r50%\n\x1b[31mred\x1b[0m\n"))
	got := b.TailText(50, true)
	if got != "red\n" {
		t.Errorf("TailText = %q", got)
	}
	if !strings.HasSuffix(b.FinalText(true), "50%xxx") && !strings.Contains(b.FinalText(true), "50%") {
		t.Errorf("FinalText not rendered")
	}
}

func TestTailSkipsCutCharacter(t *testing.T) {
	b := New()
	b.Write([]byte("ab\xc3"))
	if got := b.TailText(10, false); got != "ab" {
		t.Errorf("TailText = %q, want ab", got)
	}
	b.Write([]byte("\xa9"))
	if got := b.TailText(10, false); got != "abé" {
		t.Errorf("TailText = %q, want abé", got)
	}
}
