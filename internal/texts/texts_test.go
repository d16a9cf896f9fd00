package texts_test

import (
	"errors"
	"strings"
	"testing"

	"shelljob.dev/shelljob/internal/outfiles"
	"shelljob.dev/shelljob/internal/texts"
)

func TestFilesNotSent(t *testing.T) {
	l := outfiles.Limits{File: 1 << 10, Job: 3 << 10, Count: 100}
	big := texts.OutFileSkipped("big.bin", outfiles.Skip{Name: "sub/big.bin", Size: 2048, Why: outfiles.TooBig}, l)
	for name, tc := range map[string]struct {
		named               []string
		unlisted, overCount int
		want                string
	}{
		"nothing":    {want: ""},
		"named":      {named: []string{big}, want: "⚠ Not sent from $SHELLJOB_OUT:\nbig.bin (2.0 KB, over the 1.0 KB limit for one file)"},
		"count only": {overCount: 12, want: "⚠ 12 more files not sent: a command sends at most 100."},
		"one over":   {overCount: 1, want: "⚠ 1 more file not sent: a command sends at most 100."},
		"all three": {named: []string{big}, unlisted: 3, overCount: 900,
			want: "⚠ Not sent from $SHELLJOB_OUT:\nbig.bin (2.0 KB, over the 1.0 KB limit for one file)\n…and 3 more files.\n900 more files not sent: a command sends at most 100."},
	} {
		t.Run(name, func(t *testing.T) {
			if got := texts.FilesNotSent(tc.named, tc.unlisted, tc.overCount, l.Count); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		s    outfiles.Skip
		want string
	}{
		{outfiles.Skip{Name: "e.txt", Size: 1000, Why: outfiles.JobFull}, "e.txt (1000 bytes, past the 3.0 KB limit for a command's files)"},
		{outfiles.Skip{Name: "../up", Size: 1, Why: outfiles.BadName}, `"../up" (not a path inside $SHELLJOB_OUT)`},
	} {
		if got := texts.OutFileSkipped(tc.s.Name, tc.s, l); got != tc.want {
			t.Errorf("OutFileSkipped(%+v) = %q, want %q", tc.s, got, tc.want)
		}
	}
}

// A note on files not sent adds the ones that could not be read last, and
// quotes at most 160 characters of a reason.
func TestFilesUnread(t *testing.T) {
	cut := errors.New("read: " + strings.Repeat("x", 200))
	line := "any files past those sent and listed: they could not be read (read: " + strings.Repeat("x", 153) + "…)"
	if got, want := texts.FilesUnread("", cut), "⚠ Not sent from $SHELLJOB_OUT:\n"+line; got != want {
		t.Errorf("alone: got %q\nwant %q", got, want)
	}
	note := texts.FilesNotSent([]string{texts.OutFileNotSent("a.txt", "Telegram: MEDIA_EMPTY")}, 0, 0, 100)
	if got, want := texts.FilesUnread(note, cut), "⚠ Not sent from $SHELLJOB_OUT:\na.txt (could not be sent: Telegram: MEDIA_EMPTY)\n"+line; got != want {
		t.Errorf("after a file: got %q\nwant %q", got, want)
	}
}
