package tgclient

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/gotd/td/tg"

	"shelljob.dev/shelljob/bot"
	"shelljob.dev/shelljob/bot/botmetrics"
)

// handlers route the updates to the bot. Each answer runs in the lane of
// its chat (lanes), never on the updates manager's loop.
type handlers struct {
	bot   *bot.Bot
	lanes *lanes
	// self is the bot's user id, once logged in: a message sent via the
	// bot is an echoed guest answer, never a command.
	self *atomic.Int64
	log  logr.Logger
}

// register puts the handlers on d.
func (h *handlers) register(d *tg.UpdateDispatcher) {
	d.OnNewMessage(h.onNewMessage)
	d.OnNewChannelMessage(h.onNewChannelMessage)
	d.OnBotCallbackQuery(h.onCallback)
	d.OnUserTyping(h.onUserTyping)
	d.OnBotGuestChatQuery(h.onGuestQuery)
	d.OnFallback(h.onOther)
}

func (h *handlers) onNewMessage(ctx context.Context, e tg.Entities, u *tg.UpdateNewMessage) error {
	return h.onMessage(ctx, e, u.Message)
}

func (h *handlers) onNewChannelMessage(ctx context.Context, e tg.Entities, u *tg.UpdateNewChannelMessage) error {
	return h.onMessage(ctx, e, u.Message)
}

// onMessage answers a message someone sent the bot.
func (h *handlers) onMessage(ctx context.Context, e tg.Entities, mc tg.MessageClass) error {
	msg, ok := incoming(e, mc, h.self.Load())
	if !ok {
		botmetrics.UpdateTaken(botmetrics.UpdateOther)
		return nil
	}
	botmetrics.UpdateTaken(botmetrics.UpdateMessage)
	h.lanes.do(ctx, msg.Chat.ID, func(ctx context.Context) {
		if err := h.bot.HandleMessage(ctx, msg); err != nil {
			h.log.Error(err, "Could not answer a message", "chat", msg.Chat.ID, "msg", msg.ID)
		}
	})
	return nil
}

// onCallback answers a button press.
func (h *handlers) onCallback(ctx context.Context, e tg.Entities, u *tg.UpdateBotCallbackQuery) error {
	botmetrics.UpdateTaken(botmetrics.UpdateCallback)
	chat, ok := chatOf(e, u.Peer, 0)
	if !ok {
		return nil
	}
	cb := bot.Callback{QueryID: u.QueryID, From: u.UserID, Chat: chat, MsgID: u.MsgID, Data: string(u.Data)}
	h.lanes.do(ctx, chat.ID, func(ctx context.Context) {
		if err := h.bot.HandleCallback(ctx, cb); err != nil {
			h.log.Error(err, "Could not answer a button", "chat", chat.ID)
		}
	})
	return nil
}

// onUserTyping takes the Stop of a draft; other typing is not the bot's.
func (h *handlers) onUserTyping(ctx context.Context, _ tg.Entities, u *tg.UpdateUserTyping) error {
	a, ok := u.Action.(*tg.SendMessageStopDraftAction)
	if !ok {
		botmetrics.UpdateTaken(botmetrics.UpdateOther)
		return nil
	}
	botmetrics.UpdateTaken(botmetrics.UpdateDraftStop)
	h.log.V(1).Info("Draft stopped", "user", u.UserID, "draft", a.RandomID)
	h.lanes.do(ctx, u.UserID, func(ctx context.Context) { h.bot.HandleDraftStop(ctx, u.UserID, a.RandomID) })
	return nil
}

// onGuestQuery answers a guest chat query.
func (h *handlers) onGuestQuery(ctx context.Context, _ tg.Entities, u *tg.UpdateBotGuestChatQuery) error {
	botmetrics.UpdateTaken(botmetrics.UpdateGuestQuery)
	m, ok := u.Message.(*tg.Message)
	if !ok {
		return nil
	}
	from, ok := m.FromID.(*tg.PeerUser)
	if !ok {
		return nil
	}
	q := bot.GuestQuery{QueryID: u.QueryID, From: from.UserID, Text: m.Message, Chat: botAPIID(m.PeerID), Date: time.Unix(int64(m.Date), 0)}
	_, q.Private = m.PeerID.(*tg.PeerUser)
	h.lanes.do(ctx, q.Chat, func(ctx context.Context) {
		if err := h.bot.HandleGuestQuery(ctx, q); err != nil {
			h.log.Error(err, "Could not answer a guest query")
		}
	})
	return nil
}

// onOther counts the updates the bot does not take.
func (h *handlers) onOther(context.Context, tg.Entities, tg.UpdateClass) error {
	botmetrics.UpdateTaken(botmetrics.UpdateOther)
	return nil
}

// incoming reads a message someone sent the bot; its own messages, and
// its guest answers echoed (sent via the bot, whose id is self), are not.
func incoming(e tg.Entities, mc tg.MessageClass, self int64) (bot.Message, bool) {
	m, ok := mc.(*tg.Message)
	if !ok || m.Out {
		return bot.Message{}, false
	}
	if via, ok := m.GetViaBotID(); ok && via == self {
		return bot.Message{}, false
	}
	return convertMessage(e, m)
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
	return bot.Message{Chat: chat, ID: m.ID, From: from, Text: m.Message, Forwarded: fwd, ReplyTo: reply, Date: time.Unix(int64(m.Date), 0)}, true
}
