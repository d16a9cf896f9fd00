package bot_test

import (
	"strings"
	"testing"
	"time"

	"github.com/gotd/td/tg"
	clocktesting "k8s.io/utils/clock/testing"

	"shelljob.dev/shelljob/internal/faketg"
)

// Failed edits of a group preview are tried again after a wait that
// doubles up to a minute, and an edit that works brings back the pace.
// The bot runs on a fake clock that only the test moves, so the waits are
// exact.
func TestPreviewEditBackoff(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))
	e := newEnv(t, envOptions{clock: fc})
	// settle waits until the pump waits on the clock again.
	settle := func() {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !fc.HasWaiters() {
			if time.Now().After(deadline) {
				t.Fatal("the pump never waited on the clock")
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	since := e.srv.Seq()
	m := e.send(e.admin, e.group, ".a for i in $(seq 1 3000); do echo $i; sleep 0.1; done")
	settle()
	fc.Step(2 * time.Second) // pace.PreviewDelay
	pv := e.preview(since, e.group, m.ID)
	e.srv.FailNext(tg.MessagesEditMessageRequestTypeID, 5, faketg.RPCError("MESSAGE_ID_INVALID"))

	edit := func(ev faketg.Event) bool {
		return ev.Kind == faketg.Edit && ev.Chat == e.group && ev.MsgID == pv.MsgID
	}
	last := pv.Seq
	// The waits after the preview was sent: the group pace (4 s), the same
	// after the first failure, then doubled; from 30 s on the group pace is
	// 10 s, whose doubled wait (80 s) is over the minute, so a minute it is.
	// After the edit that works, the pace (10 s).
	for i, step := range []struct {
		wait time.Duration
		ok   bool
	}{
		{4 * time.Second, false},
		{4 * time.Second, false},
		{8 * time.Second, false},
		{16 * time.Second, false},
		{60 * time.Second, false},
		{60 * time.Second, true},
		{10 * time.Second, true},
	} {
		settle()
		fc.Step(step.wait - time.Second)
		settle()
		time.Sleep(100 * time.Millisecond)
		if early := e.srv.Log().After(last).Filter(edit); len(early) > 0 {
			t.Fatalf("attempt %d came a second or more early: %s", i+1, early[0])
		}
		fc.Step(time.Second)
		ev := e.wait(last, "the next edit", edit)
		if ev.OK() != step.ok {
			t.Fatalf("attempt %d: ok %v, want %v (%s)", i+1, ev.OK(), step.ok, ev)
		}
		last = ev.Seq
	}
	// Stop it; its final still goes out.
	e.send(e.admin, e.group, ".k")
	e.wait(last, "the final", func(ev faketg.Event) bool {
		return edit(ev) && ev.OK() && strings.Contains(ev.Text, "Stopped")
	})
}
