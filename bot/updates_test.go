package bot_test

import (
	"strings"
	"testing"
	"time"

	"github.com/gotd/td/bin"
	"github.com/gotd/td/tg"

	"shelljob.dev/shelljob/internal/faketg"
)

// While an answer's Telegram call waits, more updates arrive than the
// updates manager's queues hold (messages, and the results of the finals'
// edits); the answer's own result must still get through, and every later
// message must be answered. The manager's loop once ran the answers
// itself, and an answer's result waited for room in that loop's full
// queue: the bot answered nothing more, and a restart hung the same way.
func TestAnswerWaitsWhileUpdatesPileUp(t *testing.T) {
	const jobs = 16
	e := newEnv(t, envOptions{workers: jobs})
	since := e.srv.Seq()
	// The updates manager tracks the group from its first update: a burst
	// of messages that come out of order would start it past some of them.
	first := e.send(e.admin, e.group, ".k")
	e.wait(since, "the first answer", sendTo(e.group, first.ID))
	var cmds []faketg.Message
	for range jobs {
		cmds = append(cmds, e.send(e.admin, e.group, ".a echo go; sleep 30"))
	}
	var previews []faketg.Event
	for _, m := range cmds {
		previews = append(previews, e.preview(since, e.group, m.ID))
	}

	held, release := e.srv.Hold(tg.MessagesSendMessageRequestTypeID, func(o bin.Object) bool {
		r, ok := o.(*tg.MessagesSendMessageRequest)
		return ok && strings.HasPrefix(r.Message, "⏹ Stopping")
	})
	defer release()
	k := e.send(e.admin, e.group, ".k all")
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("the .k all answer never came")
	}
	var ls []faketg.Message
	for range 30 {
		ls = append(ls, e.send(e.admin, e.group, ".k ls"))
	}
	release()

	if ev := e.wait(since, "the .k all answer", sendTo(e.group, k.ID)); strings.Count(ev.Text, "⏹ Stopping") != jobs {
		t.Errorf(".k all = %q", ev.Text)
	}
	for i, pv := range previews {
		if fin := e.finalEdit(pv.Seq, pv.MsgID); fin.Text != "go\n\n⏹ Stopped (exit 130)." {
			t.Errorf("final of #%d = %q", i+1, fin.Text)
		}
	}
	for _, m := range ls {
		e.wait(since, "a .k ls answer", sendTo(e.group, m.ID))
	}
	for _, chat := range []*faketg.Chat{e.group, e.admin.Private()} {
		m := e.send(e.admin, chat, ".a echo after")
		if ev := e.final(since, chat, m.ID); ev.Text != "after" {
			t.Errorf("later answer = %q", ev.Text)
		}
	}
}
