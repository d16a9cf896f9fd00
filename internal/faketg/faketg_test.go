package faketg_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/go-faster/errors"
	"go.uber.org/zap/zaptest"

	"github.com/gotd/td/session"
	"github.com/gotd/td/telegram"
	"github.com/gotd/td/telegram/updates"
	updhook "github.com/gotd/td/telegram/updates/hook"
	"github.com/gotd/td/tg"

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
	lg := zaptest.NewLogger(t).Named("bot")
	_ = lg
	h := telegram.UpdateHandlerFunc(func(ctx context.Context, u tg.UpdatesClass) error {
		return nil
	})
	_ = h
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
	opts := s.ClientOptions()
	opts.SessionStorage = b.sess
	opts.UpdateHandler = gaps
	opts.Middlewares = []telegram.Middleware{updhook.UpdateHook(gaps.Handle), updhook.AffectedHook(gaps)}
	opts.RetryInterval = 100 * time.Millisecond
	opts.DialTimeout = 5 * time.Second
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
	b.stop = func() {
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Logf("bot stopped: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("bot did not stop")
		}
	}
	t.Cleanup(b.stop)
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer wcancel()
	if err := s.WaitConnected(wctx); err != nil {
		t.Fatal(err)
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
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
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
