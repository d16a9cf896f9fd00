package tgclient_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"github.com/gotd/td/tg"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/bot"
	"shelljob.dev/shelljob/bot/botmetrics"
	"shelljob.dev/shelljob/bot/settings"
	"shelljob.dev/shelljob/bot/tgclient"
	"shelljob.dev/shelljob/internal/faketg"
)

// noJobs is a cluster without jobs; the test's commands never make any.
type noJobs struct{ bot.Cluster }

func (noJobs) List(context.Context) ([]shellv1alpha1.ShellJob, error) { return nil, nil }

// connected runs a bot on srv until the test ends; its client logs to
// log.
func connected(t *testing.T, srv *faketg.Server, log logr.Logger) {
	t.Helper()
	b := bot.New(bot.Config{Admins: srv.Admins(), Log: testr.New(t)}, nil, noJobs{}, &settings.MemoryStore{})
	copts := srv.ClientOptions()
	ready := make(chan struct{})
	c := tgclient.New(b, tgclient.Options{
		Token: srv.BotToken(), AppID: 17349, AppHash: "test",
		DC: copts.DC, DCList: copts.DCList, PublicKeys: copts.PublicKeys, Log: log,
		Ready: func() { close(ready) },
	})
	b.SetTelegram(c.API)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, b) }()
	t.Cleanup(func() {
		cancel()
		<-done
		b.Wait()
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("the bot stopped: %v", err)
	case <-time.After(2 * time.Minute):
		t.Fatal("the bot never got ready")
	}
}

// updates reads the count of updates of kind.
func updates(kind string) float64 {
	return testutil.ToFloat64(botmetrics.Updates.WithLabelValues(kind))
}

// calls reads how many calls of method were timed.
func calls(t *testing.T, method string) uint64 {
	t.Helper()
	var m dto.Metric
	if err := botmetrics.CallDuration.WithLabelValues(method).(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

// TestMetricsThroughTelegram: the updates the bot takes from the fake
// Telegram count by kind, and its calls, their errors and a flood wait the
// client waits out count by method, through the client's middlewares.
func TestMetricsThroughTelegram(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := faketg.NewTest(t, faketg.Options{})
	admin := srv.NewUser(faketg.UserOptions{FirstName: "Ada", Admin: true})
	guestChat := srv.NewChat(faketg.Group, faketg.ChatOptions{NoBot: true})
	connected(t, srv, testr.New(t))

	const send = "messages.sendMessage"
	messages, callbacks, drafts, guests, others := updates(botmetrics.UpdateMessage), updates(botmetrics.UpdateCallback),
		updates(botmetrics.UpdateDraftStop), updates(botmetrics.UpdateGuestQuery), updates(botmetrics.UpdateOther)
	sends := calls(t, send)
	floodErrors := testutil.ToFloat64(botmetrics.CallErrors.WithLabelValues(send, "FLOOD_WAIT"))
	floods := testutil.ToFloat64(botmetrics.FloodWaits.WithLabelValues(send))
	floodSeconds := testutil.ToFloat64(botmetrics.FloodWaitSeconds.WithLabelValues(send))

	// The help's reply gets a flood wait first, which the client waits out.
	srv.FailNext(tg.MessagesSendMessageRequestTypeID, 1, faketg.RPCError("FLOOD_WAIT_1"))
	since := srv.Seq()
	if _, err := admin.Send(ctx, admin.Private(), "/help"); err != nil {
		t.Fatal(err)
	}
	help, err := srv.WaitEvent(ctx, since, func(e faketg.Event) bool { return e.Kind == faketg.Send && e.OK() })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Press(ctx, admin.Private(), help.MsgID, []byte("gone")); err != nil {
		t.Fatal(err)
	}
	if err := admin.StopDraft(ctx, faketg.DraftInfo{RandomID: 42}); err != nil {
		t.Fatal(err)
	}
	q, err := admin.Guest(ctx, guestChat, "@"+srv.BotUsername()+" .k")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Answer(ctx); err != nil {
		t.Fatal(err)
	}

	// The fake logs a call before the client has its answer: the client's
	// counts may come a moment later.
	for kind, before := range map[string]float64{
		botmetrics.UpdateMessage: messages, botmetrics.UpdateCallback: callbacks, botmetrics.UpdateGuestQuery: guests,
		// The stop of a draft has no answer to wait for; the help's reply,
		// the bot's own message, comes back as an update it ignores.
		botmetrics.UpdateDraftStop: drafts, botmetrics.UpdateOther: others,
	} {
		eventually(ctx, t, kind+" updates", func() bool { return updates(kind) > before })
	}
	eventually(ctx, t, send+" and its retry timed", func() bool { return calls(t, send)-sends >= 2 })
	for _, m := range []string{"messages.setBotCallbackAnswer", "messages.setBotGuestChatResult", "updates.getState"} {
		eventually(ctx, t, m+" timed", func() bool { return calls(t, m) > 0 })
	}
	if got := updates(botmetrics.UpdateMessage) - messages; got != 1 {
		t.Errorf("message updates: %v more, want 1", got)
	}
	if got := calls(t, send) - sends; got != 2 {
		t.Errorf("%s timed %d more times, want 2: the flood wait and the retry", send, got)
	}
	if got := testutil.ToFloat64(botmetrics.CallErrors.WithLabelValues(send, "FLOOD_WAIT")) - floodErrors; got != 1 {
		t.Errorf("%s FLOOD_WAIT errors: %v more, want 1", send, got)
	}
	if got := testutil.ToFloat64(botmetrics.FloodWaits.WithLabelValues(send)) - floods; got != 1 {
		t.Errorf("%s flood waits: %v more, want 1", send, got)
	}
	if got := testutil.ToFloat64(botmetrics.FloodWaitSeconds.WithLabelValues(send)) - floodSeconds; got != 1 {
		t.Errorf("%s flood wait seconds: %v more, want 1", send, got)
	}
}

// eventually waits until done, or fails the test when ctx ends.
func eventually(ctx context.Context, t *testing.T, what string, done func() bool) {
	t.Helper()
	for !done() {
		select {
		case <-ctx.Done():
			t.Fatalf("never: %s", what)
		case <-time.After(10 * time.Millisecond):
		}
	}
}
