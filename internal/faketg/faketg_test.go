package faketg_test

import (
	"bytes"
	"context"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-faster/errors"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"

	"github.com/gotd/td/crypto"
	"github.com/gotd/td/session"
	"github.com/gotd/td/telegram"
	"github.com/gotd/td/telegram/dcs"
	"github.com/gotd/td/telegram/downloader"
	"github.com/gotd/td/telegram/updates"
	updhook "github.com/gotd/td/telegram/updates/hook"
	"github.com/gotd/td/telegram/uploader"
	"github.com/gotd/td/tg"
	"github.com/gotd/td/tgerr"

	"shelljob.dev/shelljob/internal/faketg"
)

// testBot is a gotd bot as production code builds one: updates manager,
// hooks, login by token, Run. Handlers are set on d before start.
type testBot struct {
	t      *testing.T
	d      tg.UpdateDispatcher
	api    *tg.Client
	client *telegram.Client
	store  *memState
	sess   *session.StorageMemory

	mu   sync.Mutex
	seen []tg.UpdateClass // every update the dispatcher got
	wake chan struct{}

	stop func()
	done chan error
}

func newTestBot(t *testing.T) *testBot {
	b := &testBot{t: t, d: tg.NewUpdateDispatcher(), store: newMemState(), sess: &session.StorageMemory{}, wake: make(chan struct{})}
	return b
}

// start runs the bot against s until the test ends or restart/stop.
func (b *testBot) start(s *faketg.Server) {
	t := b.t
	ctx, cancel := context.WithCancel(context.Background())
	lg := faketg.GotdLogger(zaptest.NewLogger(t, zaptest.Level(zapcore.InfoLevel)).Named("bot"))
	gaps := updates.New(updates.Config{
		Handler: telegram.UpdateHandlerFunc(func(ctx context.Context, u tg.UpdatesClass) error {
			if us, ok := u.(*tg.Updates); ok {
				b.mu.Lock()
				b.seen = append(b.seen, us.Updates...)
				close(b.wake)
				b.wake = make(chan struct{})
				b.mu.Unlock()
			}
			return b.d.Handle(ctx, u)
		}),
		Storage: b.store,
	})
	opts := clientOptions(t, s.Addr(), s.PublicKeyPEM())
	opts.SessionStorage = b.sess
	opts.UpdateHandler = gaps
	opts.Middlewares = []telegram.Middleware{updhook.UpdateHook(gaps.Handle), updhook.AffectedHook(gaps)}
	opts.RetryInterval = 100 * time.Millisecond
	opts.ExchangeTimeout = time.Minute
	opts.Logger = lg
	client := telegram.NewClient(telegram.TestAppID, telegram.TestAppHash, opts)
	b.client = client
	b.api = client.API()
	done := make(chan error, 1)
	b.done = done
	go func() {
		done <- client.Run(ctx, func(ctx context.Context) error {
			st, err := client.Auth().Status(ctx)
			if err != nil {
				return errors.Wrap(err, "status")
			}
			if !st.Authorized {
				if _, err := client.Auth().Bot(ctx, s.BotToken()); err != nil {
					return errors.Wrap(err, "login")
				}
			}
			self, err := client.Self(ctx)
			if err != nil {
				return errors.Wrap(err, "self")
			}
			return gaps.Run(ctx, b.api, self.ID, updates.AuthOptions{IsBot: true})
		})
	}()
	var once sync.Once
	var stop func()
	b.stop = func() { once.Do(stop) }
	stop = func() {
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Logf("bot stopped: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("bot did not stop")
		}
	}
	t.Cleanup(b.stop)
	// Generous: the key exchange checks a 2048-bit safe prime, slow under
	// -race on a loaded machine.
	wctx, wcancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer wcancel()
	if err := s.WaitConnected(wctx); err != nil {
		t.Fatal(err)
	}
}

// clientOptions points a client at the fake the way the bot's
// configuration does: a "host:port" DC address and a PEM public key.
func clientOptions(t *testing.T, addr string, pemKey []byte) telegram.Options {
	t.Helper()
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := crypto.ParseRSAPublicKeys(pemKey)
	if err != nil || len(keys) != 1 {
		t.Fatalf("parse PEM: %v (%d keys)", err, len(keys))
	}
	return telegram.Options{
		DC:         2,
		DCList:     dcs.List{Options: []tg.DCOption{{ID: 2, IPAddress: host, Port: port}}},
		PublicKeys: []telegram.PublicKey{{RSA: keys[0]}},
	}
}

// waitUpdate waits for an update the dispatcher got that match accepts.
func (b *testBot) waitUpdate(ctx context.Context, match func(tg.UpdateClass) bool) (tg.UpdateClass, error) {
	for {
		b.mu.Lock()
		for _, u := range b.seen {
			if match(u) {
				b.mu.Unlock()
				return u, nil
			}
		}
		ch := b.wake
		b.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (b *testBot) countUpdates(match func(tg.UpdateClass) bool) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, u := range b.seen {
		if match(u) {
			n++
		}
	}
	return n
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// newMessageWith matches an incoming message update with the given text.
func newMessageWith(text string) func(tg.UpdateClass) bool {
	return func(u tg.UpdateClass) bool {
		var m tg.MessageClass
		switch u := u.(type) {
		case *tg.UpdateNewMessage:
			m = u.Message
		case *tg.UpdateNewChannelMessage:
			m = u.Message
		default:
			return false
		}
		msg, ok := m.(*tg.Message)
		return ok && !msg.Out && msg.Message == text
	}
}

// memState is an updates.StateStorage that outlives a bot's run, as a
// persisted store would.
type memState struct {
	mu       sync.Mutex
	states   map[int64]updates.State
	channels map[int64]map[int64]int
}

func newMemState() *memState {
	return &memState{states: map[int64]updates.State{}, channels: map[int64]map[int64]int{}}
}

func (m *memState) GetState(_ context.Context, userID int64) (updates.State, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.states[userID]
	return s, ok, nil
}

func (m *memState) SetState(_ context.Context, userID int64, s updates.State) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.states[userID] = s
	m.channels[userID] = map[int64]int{}
	return nil
}

func (m *memState) update(userID int64, f func(*updates.State)) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.states[userID]
	if !ok {
		return errors.New("state not found")
	}
	f(&s)
	m.states[userID] = s
	return nil
}

func (m *memState) SetPts(_ context.Context, userID int64, pts int) error {
	return m.update(userID, func(s *updates.State) { s.Pts = pts })
}

func (m *memState) SetQts(_ context.Context, userID int64, qts int) error {
	return m.update(userID, func(s *updates.State) { s.Qts = qts })
}

func (m *memState) SetDate(_ context.Context, userID int64, date int) error {
	return m.update(userID, func(s *updates.State) { s.Date = date })
}

func (m *memState) SetSeq(_ context.Context, userID int64, seq int) error {
	return m.update(userID, func(s *updates.State) { s.Seq = seq })
}

func (m *memState) SetDateSeq(_ context.Context, userID int64, date, seq int) error {
	return m.update(userID, func(s *updates.State) { s.Date, s.Seq = date, seq })
}

func (m *memState) SetChannelPts(_ context.Context, userID, channelID int64, pts int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.channels[userID] == nil {
		m.channels[userID] = map[int64]int{}
	}
	m.channels[userID][channelID] = pts
	return nil
}

func (m *memState) GetChannelPts(_ context.Context, userID, channelID int64) (int, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	pts, ok := m.channels[userID][channelID]
	return pts, ok, nil
}

func (m *memState) ForEachChannels(ctx context.Context, userID int64, f func(ctx context.Context, channelID int64, pts int) error) error {
	m.mu.Lock()
	chs := map[int64]int{}
	for k, v := range m.channels[userID] {
		chs[k] = v
	}
	m.mu.Unlock()
	for id, pts := range chs {
		if err := f(ctx, id, pts); err != nil {
			return err
		}
	}
	return nil
}

func TestPrivateMessageAndReply(t *testing.T) {
	s := faketg.NewTest(t, faketg.Options{})
	alice := s.NewUser(faketg.UserOptions{Username: "alice", Admin: true})
	b := newTestBot(t)
	b.d.OnNewMessage(func(ctx context.Context, e tg.Entities, u *tg.UpdateNewMessage) error {
		m, ok := u.Message.(*tg.Message)
		if !ok || m.Out {
			return nil
		}
		req := &tg.MessagesSendMessageRequest{
			Peer:     &tg.InputPeerUser{UserID: alice.ID, AccessHash: e.Users[alice.ID].AccessHash},
			Message:  "echo: " + m.Message,
			RandomID: 1,
			Silent:   true,
		}
		req.SetReplyTo(&tg.InputReplyToMessage{ReplyToMsgID: m.ID})
		_, err := b.api.MessagesSendMessage(ctx, req)
		return err
	})
	b.start(s)
	ctx := ctxT(t)

	in, err := alice.Send(ctx, alice.Private(), "hello")
	if err != nil {
		t.Fatal(err)
	}
	ev, err := s.WaitKind(ctx, 0, faketg.Send, alice.Private())
	if err != nil {
		t.Fatal(err)
	}
	if !ev.OK() || ev.Text != "echo: hello" || ev.ReplyTo != in.ID || !ev.Silent {
		t.Fatalf("unexpected send: %s", ev)
	}
	m, ok := alice.Private().Message(ev.MsgID)
	if !ok || !m.Out || m.Text != "echo: hello" {
		t.Fatalf("message %d: %+v", ev.MsgID, m)
	}
}

func send(t *testing.T, ctx context.Context, u *faketg.User, chat *faketg.Chat, text string) faketg.Message {
	t.Helper()
	m, err := u.Send(ctx, chat, text)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func waitKind(t *testing.T, ctx context.Context, s *faketg.Server, since int, kind faketg.Kind, chat *faketg.Chat) faketg.Event {
	t.Helper()
	ev, err := s.WaitKind(ctx, since, kind, chat)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func (b *testBot) mustUpdate(ctx context.Context, match func(tg.UpdateClass) bool) tg.UpdateClass {
	b.t.Helper()
	u, err := b.waitUpdate(ctx, match)
	if err != nil {
		b.t.Fatal(err)
	}
	return u
}

// inputPeer is the bot's InputPeer for a chat, from the entities of an update.
func inputPeer(e tg.Entities, p tg.PeerClass) tg.InputPeerClass {
	switch p := p.(type) {
	case *tg.PeerUser:
		return &tg.InputPeerUser{UserID: p.UserID, AccessHash: e.Users[p.UserID].AccessHash}
	case *tg.PeerChat:
		return &tg.InputPeerChat{ChatID: p.ChatID}
	case *tg.PeerChannel:
		return &tg.InputPeerChannel{ChannelID: p.ChannelID, AccessHash: e.Channels[p.ChannelID].AccessHash}
	}
	return &tg.InputPeerEmpty{}
}

func TestDraftStopAndGroupRefusal(t *testing.T) {
	s := faketg.NewTest(t, faketg.Options{})
	alice := s.NewUser(faketg.UserOptions{Admin: true})
	g := s.NewGroup("ops")
	b := newTestBot(t)
	draftErr := make(chan error, 2)
	b.d.OnNewMessage(func(ctx context.Context, e tg.Entities, u *tg.UpdateNewMessage) error {
		m, ok := u.Message.(*tg.Message)
		if !ok || m.Out {
			return nil
		}
		_, err := b.api.MessagesSetTyping(ctx, &tg.MessagesSetTypingRequest{
			Peer: inputPeer(e, m.PeerID),
			Action: &tg.SendMessageTextDraftAction{CanStop: true, RandomID: 777,
				Text: tg.TextWithEntities{Text: "thinking…", Entities: []tg.MessageEntityClass{}}},
		})
		draftErr <- err
		return nil
	})
	b.start(s)
	ctx := ctxT(t)

	send(t, ctx, alice, alice.Private(), ".a ls")
	if err := <-draftErr; err != nil {
		t.Fatalf("draft in private chat: %v", err)
	}
	ev := waitKind(t, ctx, s, 0, faketg.Draft, alice.Private())
	if ev.Draft == nil || ev.Draft.RandomID != 777 || !ev.Draft.CanStop || ev.Text != "thinking…" {
		t.Fatalf("draft: %s", ev)
	}
	if err := alice.StopDraft(ctx, *ev.Draft); err != nil {
		t.Fatal(err)
	}
	u := b.mustUpdate(ctx, func(u tg.UpdateClass) bool {
		_, ok := u.(*tg.UpdateUserTyping)
		return ok
	})
	typing := u.(*tg.UpdateUserTyping)
	if a, ok := typing.Action.(*tg.SendMessageStopDraftAction); !ok || a.RandomID != 777 || typing.UserID != alice.ID {
		t.Fatalf("stop: %+v", typing)
	}

	// Drafts are refused in groups.
	send(t, ctx, alice, g, ".a ls")
	if err := <-draftErr; !tgerr.Is(err, faketg.ErrDraftRefused.Type) {
		t.Fatalf("draft in group: %v", err)
	}
	g.AllowDrafts(true)
	send(t, ctx, alice, g, ".a ls")
	if err := <-draftErr; err != nil {
		t.Fatalf("draft in group with AllowDrafts: %v", err)
	}
}

func TestEditsButtonsAndRefusals(t *testing.T) {
	s := faketg.NewTest(t, faketg.Options{})
	alice := s.NewUser(faketg.UserOptions{Admin: true})
	b := newTestBot(t)
	b.start(s)
	ctx := ctxT(t)
	peer := &tg.InputPeerUser{UserID: alice.ID, AccessHash: alice.AccessHash}
	markup := &tg.ReplyInlineMarkup{Rows: []tg.KeyboardInlineButtonRow{{Buttons: []tg.KeyboardInlineButton{
		{Text: "⏹ Stop", Type: &tg.InlineButtonTypeCallback{Data: []byte("shk:1")}},
	}}}}
	send := &tg.MessagesSendMessageRequest{Peer: peer, Message: "⏳ #1", RandomID: 5, NoWebpage: true}
	send.SetReplyMarkup(markup)
	res, err := b.api.MessagesSendMessage(ctx, send)
	if err != nil {
		t.Fatal(err)
	}
	id := res.(*tg.UpdateShortSentMessage).ID
	sent := waitKind(t, ctx, s, 0, faketg.Send, nil)
	if sent.MsgID != id || !sent.NoWebpage || len(sent.Buttons) != 1 || string(sent.Buttons[0][0].Data) != "shk:1" {
		t.Fatalf("send: %s", sent)
	}

	edit := func(text string, withMarkup bool) error {
		req := &tg.MessagesEditMessageRequest{Peer: peer, ID: id}
		req.SetMessage(text)
		if withMarkup {
			req.SetReplyMarkup(markup)
		}
		_, err := b.api.MessagesEditMessage(ctx, req)
		return err
	}
	if err := edit("⏳ #1\n\nout", true); err != nil {
		t.Fatal(err)
	}
	if err := edit("⏳ #1\n\nout", true); !tgerr.Is(err, "MESSAGE_NOT_MODIFIED") {
		t.Fatalf("same edit: %v", err)
	}
	// Faults: FLOOD_WAIT_3 for the next edit only.
	s.FailNext(tg.MessagesEditMessageRequestTypeID, 1, faketg.RPCError("FLOOD_WAIT_3"))
	err = edit("⏳ #1\n\nmore", true)
	if d, ok := tgerr.AsFloodWait(err); !ok || d != 3*time.Second {
		t.Fatalf("flood wait: %v", err)
	}
	if err := edit("⏳ #1\n\nmore", true); err != nil {
		t.Fatal(err)
	}
	// An edit without markup removes the buttons.
	if err := edit("final", false); err != nil {
		t.Fatal(err)
	}
	m, _ := alice.Private().Message(id)
	if m.Text != "final" || len(m.Buttons) != 0 || m.Edits != 3 {
		t.Fatalf("after edits: %+v", m)
	}
	// Deleted by the user: edits fail as on Telegram.
	alice.Private().Delete(id)
	if err := edit("again", false); !tgerr.Is(err, "MESSAGE_ID_INVALID") {
		t.Fatalf("edit of deleted: %v", err)
	}
	edits := s.Log().Of(faketg.Edit)
	if len(edits) != 6 || edits[1].Err == nil || edits[2].Err.Type != "FLOOD_WAIT" || !edits[3].OK() {
		t.Fatalf("edits:\n%s", edits)
	}
	// Bot deletes its message... a new one.
	res, err = b.api.MessagesSendMessage(ctx, &tg.MessagesSendMessageRequest{Peer: peer, Message: "tmp", RandomID: 6})
	if err != nil {
		t.Fatal(err)
	}
	id2 := res.(*tg.UpdateShortSentMessage).ID
	if _, err := b.api.MessagesDeleteMessages(ctx, &tg.MessagesDeleteMessagesRequest{Revoke: true, ID: []int{id2}}); err != nil {
		t.Fatal(err)
	}
	del := waitKind(t, ctx, s, 0, faketg.Delete, nil)
	if del.Chat != alice.Private() || len(del.MsgIDs) != 1 || del.MsgIDs[0] != id2 {
		t.Fatalf("delete: %s", del)
	}
	if m, _ := alice.Private().Message(id2); !m.Deleted {
		t.Fatal("not deleted")
	}
}

func TestPressToast(t *testing.T) {
	s := faketg.NewTest(t, faketg.Options{})
	alice := s.NewUser(faketg.UserOptions{Admin: true})
	mallory := s.NewUser(faketg.UserOptions{Username: "mallory"})
	g := s.NewGroup("ops")
	b := newTestBot(t)
	b.d.OnBotCallbackQuery(func(ctx context.Context, e tg.Entities, u *tg.UpdateBotCallbackQuery) error {
		text := "⏹ Stopping #1…"
		if u.UserID != alice.ID {
			text = "Only the bot's admins can do that."
		}
		if string(u.Data) != "shk:1" {
			text = "That button is out of date."
		}
		_, err := b.api.MessagesSetBotCallbackAnswer(ctx, &tg.MessagesSetBotCallbackAnswerRequest{QueryID: u.QueryID, Message: text})
		return err
	})
	b.start(s)
	ctx := ctxT(t)
	for _, tc := range []struct {
		u    *faketg.User
		data string
		want string
	}{
		{alice, "shk:1", "⏹ Stopping #1…"},
		{mallory, "shk:1", "Only the bot's admins can do that."},
		{alice, "shk:x\x00", "That button is out of date."},
	} {
		ans, err := tc.u.Press(ctx, g, 42, []byte(tc.data))
		if err != nil {
			t.Fatal(err)
		}
		if ans.Text != tc.want || ans.Event.Chat != g || ans.Event.MsgID != 42 {
			t.Errorf("press %q by %s: %q (%s)", tc.data, tc.u, ans.Text, ans.Event)
		}
	}
}

func TestCommandsAndProfile(t *testing.T) {
	s := faketg.NewTest(t, faketg.Options{Bot: faketg.BotOptions{
		Username: "shell_bot", Aliases: []faketg.Alias{{Username: "sh_alias", Active: true}, {Username: "old_alias"}},
	}})
	b := newTestBot(t)
	b.start(s)
	ctx := ctxT(t)
	users, err := b.api.UsersGetUsers(ctx, []tg.InputUserClass{&tg.InputUserSelf{}})
	if err != nil {
		t.Fatal(err)
	}
	me := users[0].(*tg.User)
	if me.Username != "shell_bot" || len(me.Usernames) != 3 || !me.Usernames[1].Active || me.Usernames[2].Active || !me.Bot {
		t.Fatalf("self: %+v", me)
	}
	s.SetBotProfile("", faketg.Alias{Username: "only_alias", Active: true})
	users, _ = b.api.UsersGetUsers(ctx, []tg.InputUserClass{&tg.InputUserSelf{}})
	me = users[0].(*tg.User)
	if me.Username != "" || len(me.Usernames) != 1 || me.Usernames[0].Username != "only_alias" {
		t.Fatalf("self after SetBotProfile: %+v", me)
	}
	if _, err := b.api.BotsSetBotCommands(ctx, &tg.BotsSetBotCommandsRequest{
		Scope:    &tg.BotCommandScopeDefault{},
		Commands: []tg.BotCommand{{Command: "help", Description: "Help"}, {Command: "settings", Description: "Settings"}},
	}); err != nil {
		t.Fatal(err)
	}
	if c := s.BotCommands(); len(c) != 2 || c[1].Command != "settings" {
		t.Fatalf("commands: %+v", c)
	}
	if ev := waitKind(t, ctx, s, 0, faketg.Commands, nil); len(ev.Commands) != 2 {
		t.Fatalf("commands event: %s", ev)
	}
}

func TestFiles(t *testing.T) {
	s := faketg.NewTest(t, faketg.Options{})
	alice := s.NewUser(faketg.UserOptions{Admin: true})
	b := newTestBot(t)
	type got struct {
		name string
		data []byte
		err  error
	}
	files := make(chan got, 2)
	b.d.OnNewMessage(func(ctx context.Context, e tg.Entities, u *tg.UpdateNewMessage) error {
		m, ok := u.Message.(*tg.Message)
		if !ok || m.Out || m.Media == nil {
			return nil
		}
		var (
			loc  tg.InputFileLocationClass
			name string
		)
		switch md := m.Media.(type) {
		case *tg.MessageMediaDocument:
			d := md.Document.(*tg.Document)
			loc = &tg.InputDocumentFileLocation{ID: d.ID, AccessHash: d.AccessHash, FileReference: d.FileReference}
			for _, a := range d.Attributes {
				if f, ok := a.(*tg.DocumentAttributeFilename); ok {
					name = f.FileName
				}
			}
		case *tg.MessageMediaPhoto:
			p := md.Photo.(*tg.Photo)
			loc = &tg.InputPhotoFileLocation{ID: p.ID, AccessHash: p.AccessHash, FileReference: p.FileReference, ThumbSize: "x"}
			name = "photo"
		}
		var buf bytes.Buffer
		_, err := downloader.NewDownloader().Download(b.api, loc).Stream(ctx, &buf)
		files <- got{name, buf.Bytes(), err}
		return nil
	})
	b.start(s)
	ctx := ctxT(t)

	big := bytes.Repeat([]byte("0123456789abcdef"), 70000) // > 1 MiB: several getFile parts
	if _, err := alice.In(alice.Private()).Document("big.log", "text/plain", big).Text(ctx, ".a wc -c big.log"); err != nil {
		t.Fatal(err)
	}
	if g := <-files; g.err != nil || g.name != "big.log" || !bytes.Equal(g.data, big) {
		t.Fatalf("document: %q %d bytes, %v", g.name, len(g.data), g.err)
	}
	jpeg := []byte("\xff\xd8\xff\xe0 fake jpeg")
	if _, err := alice.In(alice.Private()).Photo(jpeg).Text(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if g := <-files; g.err != nil || !bytes.Equal(g.data, jpeg) {
		t.Fatalf("photo: %d bytes, %v", len(g.data), g.err)
	}

	// The bot uploads a document and a photo.
	peer := &tg.InputPeerUser{UserID: alice.ID, AccessHash: alice.AccessHash}
	up := uploader.NewUploader(b.api)
	out := bytes.Repeat([]byte("line\n"), 100000)
	f, err := up.FromBytes(ctx, "output.txt", out)
	if err != nil {
		t.Fatal(err)
	}
	req := &tg.MessagesSendMediaRequest{Peer: peer, Message: "✂️ The full output", RandomID: 9,
		Media: &tg.InputMediaUploadedDocument{File: f, MimeType: "text/plain", ForceFile: true,
			Attributes: []tg.DocumentAttributeClass{&tg.DocumentAttributeFilename{FileName: "output.txt"}}}}
	req.SetReplyTo(&tg.InputReplyToMessage{ReplyToMsgID: 1})
	if _, err := b.api.MessagesSendMedia(ctx, req); err != nil {
		t.Fatal(err)
	}
	ev := waitKind(t, ctx, s, 0, faketg.Upload, alice.Private())
	if ev.Media == nil || ev.Media.Photo || ev.Media.Filename != "output.txt" || ev.Media.MIME != "text/plain" ||
		!ev.Media.ForceFile || !bytes.Equal(ev.Media.Data, out) || ev.Text != "✂️ The full output" || ev.ReplyTo != 1 {
		t.Fatalf("upload: %s", ev)
	}
	pf, err := up.FromBytes(ctx, "plot.jpg", jpeg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.api.MessagesSendMedia(ctx, &tg.MessagesSendMediaRequest{Peer: peer, RandomID: 10,
		Media: &tg.InputMediaUploadedPhoto{File: pf}}); err != nil {
		t.Fatal(err)
	}
	ev = waitKind(t, ctx, s, ev.Seq, faketg.Upload, alice.Private())
	if ev.Media == nil || !ev.Media.Photo || !bytes.Equal(ev.Media.Data, jpeg) {
		t.Fatalf("photo upload: %s", ev)
	}
	if m, ok := alice.Private().Message(ev.MsgID); !ok || m.Media == nil || !m.Out {
		t.Fatalf("photo message: %+v", m)
	}
}

func TestGroupsSupergroupsForums(t *testing.T) {
	s := faketg.NewTest(t, faketg.Options{})
	alice := s.NewUser(faketg.UserOptions{Admin: true})
	bob := s.NewUser(faketg.UserOptions{})
	g := s.NewGroup("ops")
	sg := s.NewSupergroup("ops2")
	f := s.NewForum("forum")
	b := newTestBot(t)
	reply := func(ctx context.Context, e tg.Entities, m *tg.Message) error {
		if m.Out || m.Message == "" {
			return nil
		}
		r := &tg.InputReplyToMessage{ReplyToMsgID: m.ID}
		if h, ok := m.ReplyTo.(*tg.MessageReplyHeader); ok && h.ForumTopic {
			top := h.ReplyToTopID
			if top == 0 {
				top = h.ReplyToMsgID
			}
			r.SetTopMsgID(top)
		}
		req := &tg.MessagesSendMessageRequest{Peer: inputPeer(e, m.PeerID), Message: "re: " + m.Message, RandomID: int64(m.ID)}
		req.SetReplyTo(r)
		_, err := b.api.MessagesSendMessage(ctx, req)
		return err
	}
	b.d.OnNewMessage(func(ctx context.Context, e tg.Entities, u *tg.UpdateNewMessage) error {
		if m, ok := u.Message.(*tg.Message); ok {
			return reply(ctx, e, m)
		}
		return nil
	})
	b.d.OnNewChannelMessage(func(ctx context.Context, e tg.Entities, u *tg.UpdateNewChannelMessage) error {
		if m, ok := u.Message.(*tg.Message); ok {
			return reply(ctx, e, m)
		}
		return nil
	})
	b.start(s)
	ctx := ctxT(t)

	for _, c := range []*faketg.Chat{g, sg} {
		in := send(t, ctx, alice, c, "in "+c.Title)
		ev := waitKind(t, ctx, s, 0, faketg.Send, c)
		if !ev.OK() || ev.Text != "re: in "+c.Title || ev.ReplyTo != in.ID {
			t.Fatalf("%s: %s", c, ev)
		}
	}
	// A reply to the bot's message, forwarded, by a non-admin.
	prev := waitKind(t, ctx, s, 0, faketg.Send, sg)
	seq := s.Seq()
	in, err := bob.In(sg).Reply(prev.MsgID).Forwarded(alice).Text(ctx, "fwd")
	if err != nil {
		t.Fatal(err)
	}
	u := b.mustUpdate(ctx, newMessageWith("fwd")).(*tg.UpdateNewChannelMessage)
	m := u.Message.(*tg.Message)
	if h, ok := m.ReplyTo.(*tg.MessageReplyHeader); !ok || h.ReplyToMsgID != prev.MsgID || m.FwdFrom.FromID == nil || m.ID != in.ID {
		t.Fatalf("forwarded reply: %+v", m)
	}
	waitKind(t, ctx, s, seq, faketg.Send, sg)

	// Forum topics.
	topic, err := f.NewTopic(ctx, "builds")
	if err != nil {
		t.Fatal(err)
	}
	seq = s.Seq()
	if _, err := alice.In(f).Topic(topic.ID).Text(ctx, "in topic"); err != nil {
		t.Fatal(err)
	}
	ev := waitKind(t, ctx, s, seq, faketg.Send, f)
	if ev.TopMsgID != topic.ID || ev.Text != "re: in topic" {
		t.Fatalf("topic reply: %s", ev)
	}
	if m, _ := f.Message(ev.MsgID); m.TopicID != topic.ID {
		t.Fatalf("bot's message not in topic: %+v", m)
	}

	// Channel difference from an old pts serves the history.
	diff, err := b.api.UpdatesGetChannelDifference(ctx, &tg.UpdatesGetChannelDifferenceRequest{
		Channel: &tg.InputChannel{ChannelID: sg.ID, AccessHash: sg.AccessHash},
		Filter:  &tg.ChannelMessagesFilterEmpty{}, Pts: 1, Limit: 100,
	})
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := diff.(*tg.UpdatesChannelDifference); !ok || len(d.NewMessages) != 3 || !d.Final {
		t.Fatalf("channel difference: %+v", diff)
	}
	// A wrong access hash is refused.
	_, err = b.api.MessagesSendMessage(ctx, &tg.MessagesSendMessageRequest{
		Peer: &tg.InputPeerChannel{ChannelID: sg.ID, AccessHash: 1}, Message: "x", RandomID: 1})
	if !tgerr.Is(err, "CHANNEL_INVALID") {
		t.Fatalf("wrong access hash: %v", err)
	}
}

func TestGuestQuery(t *testing.T) {
	s := faketg.NewTest(t, faketg.Options{})
	alice := s.NewUser(faketg.UserOptions{Admin: true})
	other := s.NewChat(faketg.Group, faketg.ChatOptions{Title: "elsewhere", NoBot: true})
	b := newTestBot(t)
	b.d.OnBotGuestChatQuery(func(ctx context.Context, e tg.Entities, u *tg.UpdateBotGuestChatQuery) error {
		m := u.Message.(*tg.Message)
		refs := len(u.ReferenceMessages)
		id, err := b.api.MessagesSetBotGuestChatResult(ctx, &tg.MessagesSetBotGuestChatResultRequest{
			QueryID: u.QueryID,
			Result: &tg.InputBotInlineResult{ID: "1", Type: "article",
				SendMessage: &tg.InputBotInlineMessageText{Message: "⏳ Running… " + m.Message + " refs=" + strconv.Itoa(refs)}},
		})
		if err != nil {
			return err
		}
		// Edit through the DC the ID names, as production code does.
		dc, err := b.client.DC(ctx, id.(*tg.InputBotInlineMessageID64).DCID, 1)
		if err != nil {
			return err
		}
		defer func() { _ = dc.Close() }()
		_, err = tg.NewClient(dc).MessagesEditInlineBotMessage(ctx, &tg.MessagesEditInlineBotMessageRequest{ID: id, Message: "done"})
		return err
	})
	b.start(s)
	ctx := ctxT(t)

	ref := send(t, ctx, alice, other, "some context")
	seq := s.Seq()
	q, err := alice.Guest(ctx, other, "@shelljob_bot .a ls", ref)
	if err != nil {
		t.Fatal(err)
	}
	ans, err := q.Answer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ans.InlineID == nil || ans.Chat != other {
		t.Fatalf("answer: %+v", ans)
	}
	ev := waitKind(t, ctx, s, seq, faketg.InlineEdit, nil)
	if ev.QueryID != q.ID || ev.Text != "done" || ev.Chat != other {
		t.Fatalf("inline edit: %s", ev)
	}
	res := waitKind(t, ctx, s, seq, faketg.GuestResult, nil)
	if res.Text != "⏳ Running… @shelljob_bot .a ls refs=1" {
		t.Fatalf("guest result: %s", res)
	}
	if m, _ := s.GuestAnswer(q.ID); m.Text != "done" || m.Edits != 1 {
		t.Fatalf("guest answer: %+v", m)
	}
	if len(s.Log().Method("auth.importAuthorization").OK()) != 1 {
		t.Fatal("the edit did not go through a transferred connection")
	}
	// Nothing in the chat the bot is not in reached it as a message.
	if n := b.countUpdates(newMessageWith("some context")); n != 0 {
		t.Fatalf("bot saw %d messages of a chat it is not in", n)
	}
}

func TestRestartCatchesUp(t *testing.T) {
	s := faketg.NewTest(t, faketg.Options{})
	alice := s.NewUser(faketg.UserOptions{Admin: true})
	other := s.NewChat(faketg.Group, faketg.ChatOptions{NoBot: true})
	b := newTestBot(t)
	b.start(s)
	ctx := ctxT(t)
	send(t, ctx, alice, alice.Private(), "one")
	b.mustUpdate(ctx, newMessageWith("one"))

	b.stop()
	send(t, ctx, alice, alice.Private(), "two")
	send(t, ctx, alice, alice.Private(), "three")
	if _, err := alice.Guest(ctx, other, "@shelljob_bot .a uptime"); err != nil {
		t.Fatal(err)
	}

	// Same session and updates state, new process.
	b2 := newTestBot(t)
	b2.sess, b2.store = b.sess, b.store
	b2.start(s)
	b2.mustUpdate(ctx, newMessageWith("two"))
	b2.mustUpdate(ctx, newMessageWith("three"))
	b2.mustUpdate(ctx, func(u tg.UpdateClass) bool { _, ok := u.(*tg.UpdateBotGuestChatQuery); return ok })
	if n := b2.countUpdates(newMessageWith("one")); n != 0 {
		t.Fatalf("got %q again after restart", "one")
	}
	if diffs := s.Log().Method("updates.getDifference"); len(diffs) < 2 {
		t.Fatalf("getDifference calls: %d", len(diffs))
	}

	// A cut connection: a message sent while gotd reconnects is lost
	// until the next one shows the pts gap; getDifference then brings it.
	seq := s.Seq()
	s.DisconnectBot()
	send(t, ctx, alice, alice.Private(), "four")
	if _, err := s.WaitEvent(ctx, seq, func(e faketg.Event) bool { return e.Method == "users.getUsers" }); err != nil {
		t.Fatal(err)
	}
	send(t, ctx, alice, alice.Private(), "five")
	b2.mustUpdate(ctx, newMessageWith("five"))
	b2.mustUpdate(ctx, newMessageWith("four"))
}

func TestEntitiesAndShortUpdates(t *testing.T) {
	s := faketg.NewTest(t, faketg.Options{ShortUpdates: true})
	alice := s.NewUser(faketg.UserOptions{Admin: true})
	b := newTestBot(t)
	b.start(s)
	ctx := ctxT(t)
	send(t, ctx, alice, alice.Private(), "/help@shelljob_bot")
	u := b.mustUpdate(ctx, newMessageWith("/help@shelljob_bot")).(*tg.UpdateNewMessage)
	m := u.Message.(*tg.Message)
	if len(m.Entities) != 1 {
		t.Fatalf("entities: %+v", m.Entities)
	}
	if e, ok := m.Entities[0].(*tg.MessageEntityBotCommand); !ok || e.Offset != 0 || e.Length != len("/help@shelljob_bot") {
		t.Fatalf("entity: %+v", m.Entities[0])
	}
	// A short update still names its sender.
	if from, ok := m.FromID.(*tg.PeerUser); !ok || from.UserID != alice.ID {
		t.Fatalf("from: %+v", m.FromID)
	}
	send(t, ctx, alice, alice.Private(), "ping @shelljob_bot ✓ /k")
	u = b.mustUpdate(ctx, newMessageWith("ping @shelljob_bot ✓ /k")).(*tg.UpdateNewMessage)
	m = u.Message.(*tg.Message)
	if len(m.Entities) != 2 {
		t.Fatalf("entities: %+v", m.Entities)
	}
}

// TestFileBytesCap: past Options.FileBytes the oldest files' bytes go, with
// a clear error for a read of one, and their messages stay.
func TestFileBytesCap(t *testing.T) {
	s := faketg.NewTest(t, faketg.Options{FileBytes: 1 << 20})
	alice := s.NewUser(faketg.UserOptions{Admin: true})
	b := newTestBot(t)
	b.start(s)
	ctx := ctxT(t)
	peer := &tg.InputPeerUser{UserID: alice.ID, AccessHash: alice.AccessHash}
	up := uploader.NewUploader(b.api)
	var sent []*faketg.Media
	seq := 0
	for i := range 3 {
		data := bytes.Repeat([]byte{byte('a' + i)}, 600<<10)
		f, err := up.FromBytes(ctx, "output.txt", data)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.api.MessagesSendMedia(ctx, &tg.MessagesSendMediaRequest{Peer: peer, RandomID: int64(20 + i),
			Media: &tg.InputMediaUploadedDocument{File: f, MimeType: "text/plain"}}); err != nil {
			t.Fatal(err)
		}
		ev := waitKind(t, ctx, s, seq, faketg.Upload, alice.Private())
		seq = ev.Seq
		sent = append(sent, ev.Media)
	}
	first, ok := s.File(sent[0].ID())
	if !ok || first.Data != nil || first.Size != 600<<10 {
		t.Errorf("the oldest file: kept %v, %d bytes of data, size %d; want its data gone, its size kept", ok, len(first.Data), first.Size)
	}
	if last, _ := s.File(sent[2].ID()); !bytes.Equal(last.Data, bytes.Repeat([]byte{'c'}, 600<<10)) {
		t.Errorf("the newest file has %d bytes, want its 600 KiB", len(last.Data))
	}
	_, err := b.api.UploadGetFile(ctx, &tg.UploadGetFileRequest{
		Location: &tg.InputDocumentFileLocation{ID: sent[0].ID(), AccessHash: sent[0].ID() * 31}, Limit: 1 << 20})
	if !tgerr.Is(err, "FILE_REFERENCE_EXPIRED") {
		t.Errorf("reading the oldest file: %v, want FILE_REFERENCE_EXPIRED", err)
	}
}
