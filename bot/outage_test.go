package bot_test

import (
	"strings"
	"testing"

	"github.com/gotd/td/bin"
	"github.com/gotd/td/tg"

	"shelljob.dev/shelljob/internal/faketg"
)

// A final whose calls fail for want of Telegram (a server error) is tried
// again until Telegram takes it, in the same form: a reply stays a reply,
// an edit of the preview stays an edit.
func TestFinalOutlivesTelegramOutage(t *testing.T) {
	e := newEnv(t, envOptions{})
	final := func(text string) func(bin.Object) bool {
		return func(o bin.Object) bool {
			switch r := o.(type) {
			case *tg.MessagesSendMessageRequest:
				return r.Message == text
			case *tg.MessagesEditMessageRequest:
				return r.Message == text
			}
			return false
		}
	}

	// A reply.
	{
		e.srv.FailWhen(tg.MessagesSendMessageRequestTypeID, 2, faketg.RPCError("INTERNAL"), final("quick"))
		since := e.srv.Seq()
		m := e.send(e.admin, e.group, ".a echo quick")
		fin := e.wait(since, "the final", sendTo(e.group, m.ID))
		if fin.Text != "quick" {
			t.Errorf("final = %q", fin.Text)
		}
		if failed := e.srv.Log().After(since).Filter(func(ev faketg.Event) bool { return ev.Text == "quick" && !ev.OK() }); len(failed) != 2 {
			t.Errorf("%d failed tries, want 2", len(failed))
		}
	}

	// The .txt file of a long output, read anew for each try.
	{
		e.srv.FailNext(tg.MessagesSendMediaRequestTypeID, 2, faketg.RPCError("INTERNAL"))
		since := e.srv.Seq()
		m := e.send(e.admin, e.group, ".a seq 1 2000")
		up := e.finalFile(since, e.group, m.ID)
		if up.Media == nil || !strings.HasPrefix(string(up.Media.Data), "1\n2\n") || !strings.HasSuffix(string(up.Media.Data), "1999\n2000") {
			t.Errorf("the output file = %s", up)
		}
		if failed := e.srv.Log().After(since).Filter(func(ev faketg.Event) bool { return ev.Kind == faketg.Upload && !ev.OK() }); len(failed) != 2 {
			t.Errorf("%d failed tries, want 2", len(failed))
		}
	}

	// The edit of a preview.
	{
		e.srv.FailWhen(tg.MessagesEditMessageRequestTypeID, 2, faketg.RPCError("INTERNAL"), final("slow"))
		since := e.srv.Seq()
		m := e.send(e.admin, e.group, ".a sleep 2.5; echo slow")
		pv := e.preview(since, e.group, m.ID)
		if fin := e.finalEdit(pv.Seq, pv.MsgID); fin.Text != "slow" {
			t.Errorf("final = %q", fin.Text)
		}
		if anew := e.srv.Log().After(pv.Seq).Filter(sendTo(e.group, m.ID)); len(anew) != 0 {
			t.Errorf("the final was sent anew: %s", anew[0])
		}
	}
}
