package tgclient

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/gotd/contrib/middleware/floodwait"
	"github.com/gotd/td/session"
	"github.com/gotd/td/telegram"
	"github.com/gotd/td/telegram/dcs"
	"github.com/gotd/td/telegram/updates"
	updhook "github.com/gotd/td/telegram/updates/hook"
	"github.com/gotd/td/tg"

	"shelljob.dev/shelljob/bot"
)

// Options configure Run.
type Options struct {
	// AppID and AppHash identify the application (my.telegram.org).
	AppID   int
	AppHash string
	// Token is the bot's token from BotFather.
	Token string
	// Session stores the session. Defaults to memory (tests).
	Session session.Storage
	// State stores the updates state. Defaults to memory (tests).
	State updates.StateStorage
	// DC, DCList and PublicKeys point the client at a server other than
	// Telegram's, such as the fake of the tests and the demo. Defaults:
	// Telegram's own.
	DC         int
	DCList     dcs.List
	PublicKeys []telegram.PublicKey
	// Log defaults to a discarding logger.
	Log logr.Logger
	// Ready, when set, is called once the bot takes updates.
	Ready func()
}

// Client is the bot's Telegram connection.
type Client struct {
	opts   Options
	client *telegram.Client
	gaps   *updates.Manager
	gate   *startGate
	disp   tg.UpdateDispatcher
	API    *API
}

// New builds the client and its updates manager for b, with flood-wait
// handling: a FLOOD_WAIT answer is waited out and the call retried.
func New(b *bot.Bot, o Options) *Client {
	if o.Log.GetSink() == nil {
		o.Log = logr.Discard()
	}
	if o.Session == nil {
		o.Session = &session.StorageMemory{}
	}
	if o.DC == 0 {
		o.DC = 2
	}
	c := &Client{opts: o, disp: tg.NewUpdateDispatcher()}
	c.gaps = updates.New(updates.Config{Handler: c.disp, Storage: o.State})
	c.gate = &startGate{next: c.gaps, hold: true, log: o.Log}
	waiter := floodwait.NewSimpleWaiter().WithMaxRetries(10).WithMaxWait(time.Minute)
	c.client = telegram.NewClient(o.AppID, o.AppHash, telegram.Options{
		SessionStorage: o.Session,
		UpdateHandler:  c.gate,
		DC:             o.DC,
		DCList:         o.DCList,
		PublicKeys:     o.PublicKeys,
		Middlewares: []telegram.Middleware{
			waiter,
			updhook.UpdateHook(c.gate.Handle),
			updhook.AffectedHook(c.gaps),
		},
	})
	c.API = NewAPI(c.client, o.DC)
	register(c.disp, b, o.Log)
	return c
}

// Run connects, logs in with the token unless the stored session is still
// authorized, reads the bot's names, sets the command menu, resumes the
// jobs a previous run left, and takes updates until ctx ends.
// pumps is the context of the jobs' pumps, cancelled at the disconnect.
func (c *Client) Run(ctx context.Context, b *bot.Bot) error {
	return c.client.Run(ctx, func(ctx context.Context) error {
		st, err := c.client.Auth().Status(ctx)
		if err != nil {
			return fmt.Errorf("auth status: %w", err)
		}
		if !st.Authorized {
			if _, err := c.client.Auth().Bot(ctx, c.opts.Token); err != nil {
				return fmt.Errorf("bot login: %w", err)
			}
		}
		self, err := c.client.Self(ctx)
		if err != nil {
			return fmt.Errorf("read the bot's profile: %w", err)
		}
		var aliases []string
		for _, u := range self.Usernames {
			if u.Active && u.Username != self.Username {
				aliases = append(aliases, u.Username)
			}
		}
		b.SetNames(self.Username, aliases)
		if !c.savedState(ctx, self.ID) {
			// A fresh state starts after everything that came so far:
			// the held updates are handled as they are, once.
			c.gate.release(ctx)
		}
		var cmds []tg.BotCommand
		for _, cmd := range bot.Commands {
			cmds = append(cmds, tg.BotCommand{Command: cmd.Command, Description: cmd.Description})
		}
		if _, err := c.client.API().BotsSetBotCommands(ctx, &tg.BotsSetBotCommandsRequest{
			Scope: &tg.BotCommandScopeDefault{}, Commands: cmds,
		}); err != nil {
			return fmt.Errorf("set the command menu: %w", err)
		}
		if err := b.Start(ctx); err != nil {
			c.opts.Log.Error(err, "Could not resume undelivered jobs")
		}
		return c.gaps.Run(ctx, c.client.API(), self.ID, updates.AuthOptions{
			IsBot: true,
			OnStart: func(ctx context.Context) {
				// The manager has its state; it runs once this returns.
				go c.gate.release(ctx)
				if c.opts.Ready != nil {
					c.opts.Ready()
				}
			},
		})
	})
}

// savedState tells whether the updates state of the bot is stored, so that
// the manager starts from it and fetches what came after it.
func (c *Client) savedState(ctx context.Context, self int64) bool {
	if c.opts.State == nil {
		return false
	}
	_, found, err := c.opts.State.GetState(ctx, self)
	return err == nil && found
}

// startGate stands between the connection and the updates manager while
// the bot starts. Until the manager has its state, it hands updates
// straight to the handler; with a saved state its startup getDifference
// then brings the same updates again, and a command would run twice. So
// with a saved state the gate holds the updates until the manager runs
// and then gives them to it, which drops those it already fetched (by
// pts). With a fresh state the gate opens at once: the manager's state
// starts after them, so they are handled as they come, once.
type startGate struct {
	next telegram.UpdateHandler
	log  logr.Logger

	mu   sync.Mutex
	hold bool
	held []tg.UpdatesClass
}

// Handle implements telegram.UpdateHandler.
func (g *startGate) Handle(ctx context.Context, u tg.UpdatesClass) error {
	g.mu.Lock()
	if g.hold {
		g.held = append(g.held, u)
		g.mu.Unlock()
		return nil
	}
	g.mu.Unlock()
	return g.next.Handle(ctx, u)
}

// release passes the held updates on, in order, and lets the next ones
// through.
func (g *startGate) release(ctx context.Context) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.hold {
		return
	}
	for _, u := range g.held {
		if err := g.next.Handle(ctx, u); err != nil {
			g.log.Error(err, "Could not handle an update held during the startup")
		}
	}
	g.held, g.hold = nil, false
}

// register routes the updates to b.
func register(d tg.UpdateDispatcher, b *bot.Bot, log logr.Logger) {
	onMessage := func(ctx context.Context, e tg.Entities, mc tg.MessageClass) error {
		m, ok := mc.(*tg.Message)
		if !ok || m.Out {
			return nil
		}
		msg, ok := convertMessage(e, m)
		if !ok {
			return nil
		}
		if err := b.HandleMessage(ctx, msg); err != nil {
			log.Error(err, "Could not answer a message", "chat", msg.Chat.ID, "msg", msg.ID)
		}
		return nil
	}
	d.OnNewMessage(func(ctx context.Context, e tg.Entities, u *tg.UpdateNewMessage) error {
		return onMessage(ctx, e, u.Message)
	})
	d.OnNewChannelMessage(func(ctx context.Context, e tg.Entities, u *tg.UpdateNewChannelMessage) error {
		return onMessage(ctx, e, u.Message)
	})
	d.OnBotCallbackQuery(func(ctx context.Context, e tg.Entities, u *tg.UpdateBotCallbackQuery) error {
		chat, ok := chatOf(e, u.Peer, 0)
		if !ok {
			return nil
		}
		cb := bot.Callback{QueryID: u.QueryID, From: u.UserID, Chat: chat, MsgID: u.MsgID, Data: string(u.Data)}
		if err := b.HandleCallback(ctx, cb); err != nil {
			log.Error(err, "Could not answer a button", "chat", chat.ID)
		}
		return nil
	})
	d.OnUserTyping(func(ctx context.Context, _ tg.Entities, u *tg.UpdateUserTyping) error {
		if a, ok := u.Action.(*tg.SendMessageStopDraftAction); ok {
			log.V(1).Info("Draft stopped", "user", u.UserID, "draft", a.RandomID)
			b.HandleDraftStop(ctx, u.UserID, a.RandomID)
		}
		return nil
	})
	d.OnBotGuestChatQuery(func(ctx context.Context, _ tg.Entities, u *tg.UpdateBotGuestChatQuery) error {
		m, ok := u.Message.(*tg.Message)
		if !ok {
			return nil
		}
		from, ok := m.FromID.(*tg.PeerUser)
		if !ok {
			return nil
		}
		q := bot.GuestQuery{QueryID: u.QueryID, From: from.UserID, Text: m.Message, Chat: botAPIID(m.PeerID)}
		_, q.Private = m.PeerID.(*tg.PeerUser)
		if err := b.HandleGuestQuery(ctx, q); err != nil {
			log.Error(err, "Could not answer a guest query")
		}
		return nil
	})
}

// botAPIID is the Bot API chat id of p.
func botAPIID(p tg.PeerClass) int64 {
	switch p := p.(type) {
	case *tg.PeerUser:
		return p.UserID
	case *tg.PeerChat:
		return -p.ChatID
	case *tg.PeerChannel:
		return -1000000000000 - p.ChannelID
	}
	return 0
}

func chatOf(e tg.Entities, p tg.PeerClass, topic int) (bot.Chat, bool) {
	c := bot.Chat{ID: botAPIID(p), Topic: topic}
	switch p := p.(type) {
	case *tg.PeerUser:
		c.Kind, c.PeerID = bot.PeerUser, p.UserID
		if u, ok := e.Users[p.UserID]; ok {
			c.AccessHash = u.AccessHash
		}
	case *tg.PeerChat:
		c.Kind, c.PeerID = bot.PeerChat, p.ChatID
	case *tg.PeerChannel:
		c.Kind, c.PeerID = bot.PeerChannel, p.ChannelID
		if ch, ok := e.Channels[p.ChannelID]; ok {
			c.AccessHash = ch.AccessHash
		}
	default:
		return c, false
	}
	return c, true
}

// convertMessage reads a user's message. In a forum topic every message
// carries a reply header; only a real reply counts as one.
func convertMessage(e tg.Entities, m *tg.Message) (bot.Message, bool) {
	topic, reply := 0, 0
	if h, ok := m.ReplyTo.(*tg.MessageReplyHeader); ok {
		switch {
		case h.ForumTopic && h.ReplyToTopID != 0:
			topic, reply = h.ReplyToTopID, h.ReplyToMsgID
		case h.ForumTopic:
			topic = h.ReplyToMsgID
		default:
			reply = h.ReplyToMsgID
		}
	}
	chat, ok := chatOf(e, m.PeerID, topic)
	if !ok {
		return bot.Message{}, false
	}
	var from int64
	switch f := m.FromID.(type) {
	case *tg.PeerUser:
		from = f.UserID
	case nil:
		if p, ok := m.PeerID.(*tg.PeerUser); ok {
			from = p.UserID
		}
	}
	_, fwd := m.GetFwdFrom()
	return bot.Message{Chat: chat, ID: m.ID, From: from, Text: m.Message, Forwarded: fwd, ReplyTo: reply}, true
}
