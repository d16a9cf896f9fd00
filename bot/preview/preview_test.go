package preview

import (
	"strings"
	"testing"
	"time"

	"shelljob.dev/shelljob/internal/utf16text"

	"shelljob.dev/shelljob/internal/texts"
)

func TestComposeFits(t *testing.T) {
	tests := map[string]string{
		"short":      "hello\n",
		"ascii long": strings.Repeat("line of output\n", 1000),
		"emoji long": strings.Repeat("😀", 5000),
		"one line":   strings.Repeat("x", 10000),
	}
	for name, tail := range tests {
		t.Run(name, func(t *testing.T) {
			h := Header(3, Running, 0, texts.StopHint)
			got := Compose(h, tail)
			if u := utf16text.Len(got); u > PreviewUnits {
				t.Fatalf("%d units, over %d", u, PreviewUnits)
			}
			if !strings.HasPrefix(got, "⏳ #3 · .k to stop\n\n") || !strings.HasSuffix(got, "▌") {
				t.Fatalf("bad shape: %q…", got[:40])
			}
			if strings.ContainsRune(got, '\uFFFD') {
				t.Fatalf("cut a character")
			}
		})
	}
}

func TestHeaders(t *testing.T) {
	tests := map[State]string{
		Running:          "⏳ #3",
		Queued:           "⏳ #3 waiting for a free shell",
		Stopping:         "⏹ #3 stopping…",
		AwaitingApproval: "⏳ #3 waiting for approval",
		WaitingOwn:       "⏳ #3 waiting: 4 of your commands are running",
	}
	for s, want := range tests {
		if got := Header(3, s, 4, ""); got != want {
			t.Errorf("Header(%v) = %q, want %q", s, got, want)
		}
	}
	if got := Header(3, Running, 0, " · @bot .k to stop"); got != "⏳ #3 · @bot .k to stop" {
		t.Errorf("guest header %q", got)
	}
}

func TestFinal(t *testing.T) {
	tests := map[string]struct {
		out  string
		code int
		ran  bool
		stop Stop
		note string
		want string
	}{
		"plain":           {"hi\n\n", 0, true, NotStopped, "", "hi"},
		"empty":           {"  \n", 3, true, NotStopped, "", "The process exited 3."},
		"stopped":         {"tick\n", 130, true, StoppedByUser, "", "tick\n\n⏹ Stopped (exit 130)."},
		"stopped empty":   {"", 130, true, StoppedByUser, "", "The process exited 130.\n\n⏹ Stopped (exit 130)."},
		"shutdown":        {"x", 143, true, StoppedByShutdown, "", "x\n\n⏹ Stopped: the bot is going offline (exit 143)."},
		"dropped":         {"", 0, false, StoppedByUser, "", "⏹ Stopped before it ran."},
		"dropped offline": {"", 0, false, StoppedByShutdown, "", "⏹ Stopped before it ran: the bot is going offline."},
		"denied":          {"", -1, false, NotApproved, texts.DeniedNote("bob"), "⛔ Denied by bob."},
		"expired":         {"", -1, false, NotApproved, texts.ExpiredNote(10 * time.Minute), "⌛ Not approved within 10 min: it never ran."},
		"nul":             {"a\x00b", 0, true, NotStopped, "", `a\x00b`},
		"worker lost":     {"half", -1, true, NotStopped, texts.WorkerLost, "half\n\n" + texts.WorkerLost},
		"lost, no output": {"", -1, true, NotStopped, texts.WorkerLost, texts.WorkerLost},
	}
	for name, tc := range tests {
		if got := Final(tc.out, tc.code, tc.ran, tc.stop, tc.note); got != tc.want {
			t.Errorf("%s: Final = %q, want %q", name, got, tc.want)
		}
	}
}

func TestLong(t *testing.T) {
	if IsLong(strings.Repeat("é", 3999)) || !IsLong(strings.Repeat("é", 4000)) {
		t.Errorf("threshold is 4000 characters")
	}
	h := LongHead(strings.Repeat("😀", 4000))
	if utf16text.Len(h) > MessageUnits || !strings.HasPrefix(h, texts.LongFinalHead+"\n\n") {
		t.Errorf("LongHead: %d units", utf16text.Len(h))
	}
}

func TestGuest(t *testing.T) {
	if got := Guest("out\n", 130, true, StoppedByUser, ""); got != "out\n\nexit 130\n⏹ Stopped" {
		t.Errorf("Guest = %q", got)
	}
	if got := Guest("", 0, false, StoppedByShutdown, ""); got != texts.StoppedBeforeRunShutdown {
		t.Errorf("Guest dropped = %q", got)
	}
	if got := Guest("", -1, false, NotApproved, texts.DeniedNote("bob")); got != "⛔ Denied by bob." {
		t.Errorf("Guest denied = %q", got)
	}
	if got := Guest("half\n", -1, true, NotStopped, texts.WorkerLost); got != "half\n\n"+texts.WorkerLost {
		t.Errorf("Guest lost = %q", got)
	}
	if got := Guest(strings.Repeat("x", 9000), 0, true, NotStopped, ""); utf16text.Len(got) > MessageUnits {
		t.Errorf("Guest too long: %d", utf16text.Len(got))
	}
}

func TestGuestLong(t *testing.T) {
	if _, _, ok := GuestLong("short", 0, true, NotStopped, ""); ok {
		t.Error("a short output is long")
	}
	if _, _, ok := GuestLong(strings.Repeat("x", 9000), 0, false, StoppedByUser, ""); ok {
		t.Error("a job that never ran is long")
	}
	out := strings.Repeat("line\n", 2000) + "end"
	caption, file, ok := GuestLong(out, 3, true, StoppedByUser, "")
	if !ok {
		t.Fatal("not long")
	}
	if utf16text.Len(caption) > CaptionUnits || !strings.HasSuffix(caption, "end\n\nexit 3\n⏹ Stopped") {
		t.Errorf("caption (%d units) = …%q", utf16text.Len(caption), caption[max(0, len(caption)-40):])
	}
	if file != out+"\n\nexit 3\n⏹ Stopped" {
		t.Errorf("file = %.40q…", file)
	}
}

// TestLongFinalsMatchFinal checks that a final built from a long output's
// end (the output kept in a file) is the final built from the whole.
func TestLongFinalsMatchFinal(t *testing.T) {
	body := strings.Repeat("yes 😀\n", 3000) + "end"
	for _, c := range []struct {
		code int
		stop Stop
		note string
	}{
		{0, NotStopped, ""},
		{130, StoppedByUser, ""},
		{-1, StoppedByShutdown, texts.WorkerLost},
		{-1, NotStopped, texts.OutputCut},
	} {
		final := Final(" \n"+body+"\n\n", c.code, true, c.stop, c.note)
		end := LongFinalEnd(c.code, c.stop, c.note)
		if final != body+end {
			t.Errorf("%+v: the long final's end differs from Final's", c)
		}
		if got, want := LongHead(utf16text.Tail(body, MessageUnits)+end), LongHead(final); got != want {
			t.Errorf("%+v: LongHead from the end %q…, want %q…", c, got[:60], want[:60])
		}
		caption, file, ok := GuestLong(body, c.code, true, c.stop, c.note)
		if !ok {
			t.Fatalf("%+v: not long", c)
		}
		if file != body+GuestLongEnd(c.code, c.stop, c.note) {
			t.Errorf("%+v: the long guest file's end differs", c)
		}
		if got := GuestCaption(utf16text.Tail(body, CaptionUnits), c.code, c.stop, c.note); got != caption {
			t.Errorf("%+v: caption from the end %q, want %q", c, got, caption)
		}
	}
}
