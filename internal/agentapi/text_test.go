package agentapi

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// writeFollow writes a follow stream: the output in pieces, a gap, a
// keepalive and the end.
func writeFollow(t *testing.T, sink interface {
	FollowSink
	Keepalive() error
}, pieces ...string) {
	t.Helper()
	for i, p := range pieces {
		if err := sink.Data([]byte(p)); err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			if err := sink.Gap(1234); err != nil {
				t.Fatal(err)
			}
			if err := sink.Keepalive(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

var textPieces = []string{"a\xe2\x82", "\xacb\xff\x1b[3", "1mred\x1b[0m\rR\n", "10%\r100%"}

// The text stream and the follow stream of an older agent read into the
// same text.
func TestReadText(t *testing.T) {
	for mode, want := range map[TextMode]string{
		TextRendered: "a€b\\xff" + GapLine(1234) + "Rmred\n100%",
		TextEscaped:  "a€b\\xff\x1b[3" + GapLine(1234) + "1mred\x1b[0m\rR\n10%\r100%",
	} {
		t.Run(string(mode), func(t *testing.T) {
			var text bytes.Buffer
			tw := NewTextWriter(&text, mode)
			writeFollow(t, tw, textPieces...)
			if err := tw.End(); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(text.String(), TextMagic) {
				t.Errorf("text stream starts %q", text.String()[:20])
			}
			var got strings.Builder
			if err := ReadText(&text, mode, &got); err != nil {
				t.Fatal(err)
			}
			if got.String() != want {
				t.Errorf("text %q, want %q", got.String(), want)
			}

			var follow bytes.Buffer
			fw := NewFrameWriter(&follow)
			writeFollow(t, fw, textPieces...)
			if err := fw.End(int64(len(strings.Join(textPieces, ""))) + 1234); err != nil {
				t.Fatal(err)
			}
			got.Reset()
			if err := ReadText(&follow, mode, &got); err != nil {
				t.Fatal(err)
			}
			if got.String() != want {
				t.Errorf("from a follow stream: %q, want %q", got.String(), want)
			}
		})
	}
}

// A text stream cut before its end is an error.
func TestReadTextCut(t *testing.T) {
	var text bytes.Buffer
	tw := NewTextWriter(&text, TextEscaped)
	writeFollow(t, tw, "abc\n", "def\n")
	var got strings.Builder
	if err := ReadText(&text, TextEscaped, &got); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("ReadText of a cut stream: %v", err)
	}
}
