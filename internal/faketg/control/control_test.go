package control_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"shelljob.dev/shelljob/internal/faketg"
	"shelljob.dev/shelljob/internal/faketg/control"
	"shelljob.dev/shelljob/internal/faketg/echobot"
)

type env struct {
	s       *faketg.Server
	c       *control.Client
	url     string
	alice   *faketg.User
	group   *faketg.Chat
	forum   *faketg.Chat
	outside *faketg.Chat
	// polling is closed when a long-poll of GET /v1/events reaches the
	// handler.
	polling chan struct{}
}

// start runs a fake with its control API and the echo bot.
func start(t *testing.T) (context.Context, *env) {
	t.Helper()
	s := faketg.NewTest(t, faketg.Options{})
	e := &env{
		s:       s,
		alice:   s.NewUser(faketg.UserOptions{Username: "alice", Admin: true}),
		group:   s.NewGroup("ops"),
		forum:   s.NewForum("forum"),
		outside: s.NewChat(faketg.Group, faketg.ChatOptions{Title: "elsewhere", NoBot: true}),
		polling: make(chan struct{}),
	}
	s.NewUser(faketg.UserOptions{Username: "mallory"})
	h := control.NewHandler(s)
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/events" && r.URL.Query().Get("wait") != "" {
			once.Do(func() { close(e.polling) })
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	e.url = srv.URL
	e.c = control.NewClient(srv.URL, nil)

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	bctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- echobot.Run(bctx, echobot.Config{Addr: s.Addr(), PublicKeyPEM: s.PublicKeyPEM(), Token: s.BotToken()})
	}()
	t.Cleanup(func() {
		stop()
		<-done
	})
	if err := e.c.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	return ctx, e
}

func TestControl(t *testing.T) {
	ctx, e := start(t)
	c := e.c
	private := e.alice.ID

	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Connected || info.Instance == "" || info.Bot.Username != "shelljob_bot" || info.Bot.ID != faketg.DefaultBotID || info.DCAddr != e.s.Addr() {
		t.Fatalf("info %+v", info)
	}
	if len(info.Users) != 2 || info.Users[0] != (control.User{
		ID: e.alice.ID, Username: "alice", FirstName: e.alice.FirstName, Admin: true, PrivateChat: e.alice.ID, Name: e.alice.String(),
	}) || info.Users[1].Admin {
		t.Fatalf("users %+v", info.Users)
	}
	kinds := map[int64]string{}
	for _, ch := range info.Chats {
		kinds[ch.ID] = ch.Kind
	}
	if kinds[e.group.BotAPIID()] != "group" || kinds[e.forum.BotAPIID()] != "forum" || kinds[private] != "private" || len(kinds) != 5 {
		t.Fatalf("chats %+v", info.Chats)
	}
	if _, err := http.Get(e.url + "/healthz"); err != nil {
		t.Fatal(err)
	}

	t.Run("send, draft, reply, edit", func(t *testing.T) {
		seq := info.Seq
		// A long-poll that starts before the message wakes on the bot's answer.
		polled := make(chan control.Events, 1)
		go func() {
			evs, err := c.Events(ctx, control.EventsQuery{After: seq, Wait: time.Minute, Kinds: []string{"send"}})
			if err != nil {
				t.Error(err)
			}
			polled <- evs
		}()
		<-e.polling
		m, err := c.Send(ctx, control.SendRequest{Text: "hello"})
		if err != nil {
			t.Fatal(err)
		}
		if m.Chat != private || m.From != e.alice.ID || m.Text != "hello" || m.Out {
			t.Fatalf("sent %+v", m)
		}
		evs := <-polled
		if len(evs.Events) != 1 || evs.Last < evs.Events[0].Seq {
			t.Fatalf("long-poll: %+v", evs)
		}
		sent := evs.Events[0]
		want := [][]control.Button{{{Text: "⏹ Stop", Type: "callback", Data: "shk:1"}}}
		if sent.Kind != "send" || sent.Chat != private || sent.ReplyTo != m.ID || sent.Text != "⏳ echo: hello" ||
			!sent.HasMarkup || !reflect.DeepEqual(sent.Buttons, want) || !sent.Silent || !strings.Contains(sent.Summary, "messages.sendMessage") {
			t.Fatalf("send event %+v", sent)
		}
		d, err := c.WaitEvent(ctx, seq, func(e control.Event) bool { return e.Kind == "draft" })
		if err != nil {
			t.Fatal(err)
		}
		if d.Draft == nil || d.Draft.RandomID != int64(m.ID) || !d.Draft.CanStop || d.Draft.Chat != private || d.Text != "thinking about hello" {
			t.Fatalf("draft event %+v", d)
		}
		got, err := c.WaitMessage(ctx, private, func(m control.Message) bool { return m.Out && m.Text == "echo: hello" })
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != sent.MsgID || got.Edits != 1 || got.EditDate == nil || got.ReplyTo != m.ID || len(got.Buttons) != 0 {
			t.Fatalf("edited message %+v", got)
		}

		stopped, err := c.StopDraft(ctx, control.StopDraftRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if *d.Draft != stopped {
			t.Fatalf("stopped %+v, want the last draft %+v", stopped, *d.Draft)
		}
	})

	t.Run("fault, press and toast", func(t *testing.T) {
		if err := c.Fail(ctx, control.FaultRequest{Method: "messages.editMessage", N: 1, Error: "FLOOD_WAIT_3"}); err != nil {
			t.Fatal(err)
		}
		seq := e.s.Seq()
		m, err := c.Send(ctx, control.SendRequest{Chat: e.group.BotAPIID(), Text: "again"})
		if err != nil {
			t.Fatal(err)
		}
		edit, err := c.WaitEvent(ctx, seq, func(e control.Event) bool { return e.Kind == "edit" })
		if err != nil {
			t.Fatal(err)
		}
		if edit.OK() || *edit.Error != (control.RPCError{Code: 420, Type: "FLOOD_WAIT", Argument: 3, Message: edit.Error.Message}) || edit.Chat != e.group.BotAPIID() {
			t.Fatalf("edit event %+v (error %+v)", edit, edit.Error)
		}
		// The edit failed: the reply keeps its Stop button, which a press
		// without data presses.
		ans, err := c.Press(ctx, control.PressRequest{Chat: e.group.BotAPIID(), MsgID: edit.MsgID})
		if err != nil {
			t.Fatal(err)
		}
		data := "shk:" + strconv.Itoa(m.ID)
		if ans.Data != data || ans.Text != "pressed "+data || ans.Alert || ans.Seq == 0 {
			t.Fatalf("answer %+v", ans)
		}
		other := "x:1"
		ans, err = c.Press(ctx, control.PressRequest{Chat: e.group.BotAPIID(), MsgID: edit.MsgID, Data: &other})
		if err != nil || ans.Text != "pressed x:1" {
			t.Fatalf("press with data: %+v, %v", ans, err)
		}
		_, err = c.Press(ctx, control.PressRequest{Chat: e.group.BotAPIID(), MsgID: edit.MsgID, Timeout: control.Duration(time.Nanosecond)})
		if !isStatus(err, http.StatusGatewayTimeout) {
			t.Fatalf("press without time for an answer: %v", err)
		}
		if err := c.ClearFaults(ctx); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("file round trip", func(t *testing.T) {
		seq := e.s.Seq()
		data := []byte("some\nlines\n")
		m, err := c.Send(ctx, control.SendRequest{Text: "file", Document: &control.Document{Name: "in.txt", MIME: "text/plain", Data: data}})
		if err != nil {
			t.Fatal(err)
		}
		if m.Media == nil || m.Media.Name != "in.txt" || m.Media.Size != len(data) {
			t.Fatalf("sent %+v", m)
		}
		if b, err := c.File(ctx, m.Media.ID); err != nil || !bytes.Equal(b, data) {
			t.Fatalf("the user's file: %q, %v", b, err)
		}
		up, err := c.WaitEvent(ctx, seq, func(e control.Event) bool { return e.Kind == "upload" })
		if err != nil {
			t.Fatal(err)
		}
		if up.Media == nil || up.Media.Name != "echo.txt" || up.Media.MIME != "text/plain" || up.Text != "the file" || up.ReplyTo != m.ID {
			t.Fatalf("upload event %+v", up)
		}
		resp, err := http.Get(e.url + up.Media.URL)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if string(b) != "echo file\n" || resp.Header.Get("Content-Type") != "text/plain" {
			t.Fatalf("GET %s: %q %v", up.Media.URL, b, resp.Header)
		}
		msgs, err := c.Messages(ctx, private)
		if err != nil {
			t.Fatal(err)
		}
		last := msgs.Messages[len(msgs.Messages)-1]
		if last.ID != up.MsgID || last.Media == nil || last.Media.ID != up.Media.ID || !last.Out {
			t.Fatalf("last message %+v", last)
		}
		if _, err := c.Send(ctx, control.SendRequest{Text: "a photo", Photo: []byte{0xff, 0xd8, 0xff}}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("topic, new user, delete", func(t *testing.T) {
		topic, err := c.NewTopic(ctx, e.forum.BotAPIID(), control.TopicRequest{Title: "builds"})
		if err != nil {
			t.Fatal(err)
		}
		bob, err := c.NewUser(ctx, control.UserRequest{Username: "bob"})
		if err != nil {
			t.Fatal(err)
		}
		m, err := c.Send(ctx, control.SendRequest{User: bob.ID, Chat: e.forum.BotAPIID(), Topic: topic.ID, Text: "in a topic", Forwarded: true})
		if err != nil {
			t.Fatal(err)
		}
		if m.Topic != topic.ID || !m.Forwarded || m.From != bob.ID {
			t.Fatalf("sent %+v", m)
		}
		got, err := c.WaitMessage(ctx, e.forum.BotAPIID(), func(m control.Message) bool { return m.Text == "echo: in a topic" })
		if err != nil {
			t.Fatal(err)
		}
		if got.Topic != topic.ID {
			t.Fatalf("answer %+v", got)
		}
		if err := c.Delete(ctx, control.DeleteRequest{Chat: e.forum.BotAPIID(), ID: got.ID}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.WaitMessage(ctx, e.forum.BotAPIID(), func(m control.Message) bool { return m.ID == got.ID && m.Deleted }); err != nil {
			t.Fatal(err)
		}
		if err := c.Delete(ctx, control.DeleteRequest{Chat: e.forum.BotAPIID(), ID: 999}); !control.IsNotFound(err) {
			t.Fatalf("delete of no message: %v", err)
		}
		info, err := c.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range info.Chats {
			if ch.ID == e.forum.BotAPIID() && (len(ch.Topics) != 2 || ch.Topics[1] != topic) {
				t.Fatalf("forum %+v", ch)
			}
		}
		if _, err := c.NewUser(ctx, control.UserRequest{ID: bob.ID}); !isStatus(err, http.StatusConflict) {
			t.Fatalf("user ID taken: %v", err)
		}
	})

	t.Run("guest", func(t *testing.T) {
		q, err := c.Guest(ctx, control.GuestRequest{Text: "@shelljob_bot .a ls"})
		if err != nil {
			t.Fatal(err)
		}
		if q.Message.Chat != e.outside.BotAPIID() {
			t.Fatalf("query %+v", q)
		}
		ev, err := c.WaitEvent(ctx, 0, func(e control.Event) bool { return e.Kind == "inline_edit" && e.QueryID == q.QueryID })
		if err != nil {
			t.Fatal(err)
		}
		if ev.Chat != e.outside.BotAPIID() || ev.Text != "guest echo: @shelljob_bot .a ls" {
			t.Fatalf("inline edit %+v", ev)
		}
		ans, err := c.GuestAnswer(ctx, q.QueryID)
		if err != nil || ans.Text != ev.Text || ans.GuestQuery != q.QueryID {
			t.Fatalf("guest answer %+v, %v", ans, err)
		}
	})

	t.Run("errors", func(t *testing.T) {
		if _, err := c.Messages(ctx, 12345); !control.IsNotFound(err) {
			t.Errorf("messages of no chat: %v", err)
		}
		if err := c.Fail(ctx, control.FaultRequest{Method: "messages.bogus", N: 1, Error: "X"}); !isStatus(err, http.StatusBadRequest) {
			t.Errorf("fault of no method: %v", err)
		}
		if _, err := c.Send(ctx, control.SendRequest{User: 777, Text: "x"}); !control.IsNotFound(err) {
			t.Errorf("send as no user: %v", err)
		}
		if _, err := c.File(ctx, 1); !control.IsNotFound(err) {
			t.Errorf("no file: %v", err)
		}
		resp, err := http.Post(e.url+"/v1/messages", "application/json", strings.NewReader(`{"txt": "typo"}`))
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("unknown field: %s", resp.Status)
		}
		// A long-poll with nothing to wake it ends after its wait, empty.
		last := e.s.Seq()
		evs, err := c.Events(ctx, control.EventsQuery{After: last, Wait: 200 * time.Millisecond, Chat: e.outside.BotAPIID()})
		if err != nil || len(evs.Events) != 0 || evs.Last < last {
			t.Errorf("idle long-poll: %+v, %v", evs, err)
		}
	})
}

func isStatus(err error, status int) bool {
	var e *control.Error
	return errors.As(err, &e) && e.Status == status
}
