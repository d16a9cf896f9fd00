package bot_test

import (
	"fmt"
	"strings"
	"testing"

	"shelljob.dev/shelljob/internal/utf16text"

	"shelljob.dev/shelljob/bot/preview"
	"shelljob.dev/shelljob/internal/faketg"
)

// A long guest final becomes output.txt, with the output's end as its
// caption; a short one stays text. An output longer than the bot keeps is
// read again from the spool into a file, and uploaded from there.
func TestGuestLongOutputFile(t *testing.T) {
	e := newEnv(t, envOptions{})
	guest := e.srv.NewChat(faketg.Supergroup, faketg.ChatOptions{NoBot: true})
	for i, n := range []int{2000, 30000} {
		since := e.srv.Seq()
		q, err := e.admin.Guest(e.ctx, guest, fmt.Sprintf("@shelljob_bot .a seq 1 %d", n))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.Answer(e.ctx); err != nil {
			t.Fatal(err)
		}
		fin := e.wait(since, "the guest final", func(ev faketg.Event) bool {
			return ev.Kind == faketg.InlineEdit && ev.QueryID == q.ID && ev.OK()
		})
		if fin.Media == nil || fin.Media.Filename != "output.txt" {
			t.Fatalf("guest final = %s, want output.txt", fin)
		}
		want := strings.TrimSpace(seqText(1, n)) + "\n\nexit 0"
		if string(fin.Media.Data) != want {
			t.Errorf("output.txt = %.40q… (%d bytes), want %d bytes", fin.Media.Data, len(fin.Media.Data), len(want))
		}
		if end := fmt.Sprintf("%d\n%d\n\nexit 0", n-1, n); !strings.HasSuffix(fin.Text, end) || utf16text.Len(fin.Text) > preview.CaptionUnits {
			t.Errorf("caption (%d units) = %q", utf16text.Len(fin.Text), fin.Text)
		}
		if m, _ := e.srv.GuestAnswer(q.ID); m.Media == nil || m.Text != fin.Text {
			t.Errorf("guest answer = %q, media %v", m.Text, m.Media != nil)
		}
		if calls := e.srv.Log().Method("messages.uploadMedia").OK(); len(calls) != i+1 {
			t.Errorf("%d uploadMedia calls", len(calls))
		}
	}
}
