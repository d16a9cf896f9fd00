package faketg

import (
	"context"
	"time"

	"github.com/go-faster/errors"

	"github.com/gotd/td/tg"
)

// SendBuilder sends a message as a user. Its setters are cheap; Text
// sends. Get one from User.In.
type SendBuilder struct {
	u        *User
	chat     *Chat
	replyTo  int
	topic    int
	fwd      *tg.MessageFwdHeader
	media    *Media
	entities []tg.MessageEntityClass
	viaBot   bool
}

// In starts a message of u in chat.
func (u *User) In(chat *Chat) *SendBuilder { return &SendBuilder{u: u, chat: chat} }

// Reply makes the message a reply to message id of the chat (any
// message: the bot's, the user's, a topic's).
func (b *SendBuilder) Reply(id int) *SendBuilder { c := *b; c.replyTo = id; return &c }

// Topic sends the message in a forum topic (by its ID).
func (b *SendBuilder) Topic(id int) *SendBuilder { c := *b; c.topic = id; return &c }

// Forwarded makes the message a forward from another user (nil: a hidden
// sender named "Someone").
func (b *SendBuilder) Forwarded(from *User) *SendBuilder {
	c := *b
	h := &tg.MessageFwdHeader{Date: int(time.Now().Add(-time.Hour).Unix())}
	if from != nil {
		h.SetFromID(&tg.PeerUser{UserID: from.ID})
	} else {
		h.SetFromName("Someone")
	}
	c.fwd = h
	return &c
}

// Entities sets the message's entities. By default the fake adds the
// bot_command and mention entities Telegram would ("/help@bot", "@bot");
// Entities() with no arguments sends none.
func (b *SendBuilder) Entities(e ...tg.MessageEntityClass) *SendBuilder {
	c := *b
	c.entities = e
	if c.entities == nil {
		c.entities = []tg.MessageEntityClass{}
	}
	return &c
}

// ViaBot sends the message via the bot (via_bot_id), as a client posts a
// guest answer of the bot that the user picked: an echo of the bot's own
// answer, in the user's name.
func (b *SendBuilder) ViaBot() *SendBuilder { c := *b; c.viaBot = true; return &c }

// Document attaches a file as a document.
func (b *SendBuilder) Document(filename, mime string, data []byte) *SendBuilder {
	c := *b
	c.media = &Media{Filename: filename, MIME: mime, Data: data}
	return &c
}

// DocumentOfSize attaches a document of size bytes whose content the
// server does not keep, as one it let go (Media.Data): its message gives
// the size, and a download of it fails.
func (b *SendBuilder) DocumentOfSize(filename, mime string, size int) *SendBuilder {
	c := *b
	c.media = &Media{Filename: filename, MIME: mime, Size: size}
	return &c
}

// Photo attaches a photo.
func (b *SendBuilder) Photo(data []byte) *SendBuilder {
	c := *b
	c.media = &Media{Photo: true, MIME: "image/jpeg", Data: data}
	return &c
}

// Text sends the message and returns it. The bot gets it as
// updateNewMessage (updateNewChannelMessage in supergroups) with the next
// pts; a bot that is not connected gets it from updates.getDifference.
func (b *SendBuilder) Text(ctx context.Context, text string) (Message, error) {
	if b.chat.Kind == Private && b.chat.User != b.u {
		return Message{}, errors.Errorf("%s cannot write in %s", b.u, b.chat)
	}
	s := b.u.s
	s.updates.pushMu.Lock()
	defer s.updates.pushMu.Unlock()
	ents := b.entities
	if ents == nil {
		ents = autoEntities(text)
	}
	m := &Message{
		Chat: b.chat, From: b.u, Text: text, Entities: ents,
		ReplyTo: b.replyTo, TopicID: b.topic, Date: time.Now(), fwd: b.fwd, Forwarded: b.fwd != nil,
		ViaBot: b.viaBot,
	}
	if md := b.media; md != nil {
		c := *md
		s.files.addMedia(&c)
		m.Media = &c
	}
	out, upd := s.messages.add(m, true)
	if upd == nil {
		return out, nil
	}
	var u tg.UpdatesClass = s.peers.wrap(upd)
	if s.opts.ShortUpdates && b.chat.Kind == Private && out.Media == nil {
		u = shortMessage(&out, upd)
	}
	return out, s.updates.push(ctx, u)
}

func shortMessage(m *Message, upd tg.UpdateClass) *tg.UpdateShortMessage {
	n := upd.(*tg.UpdateNewMessage)
	v := &tg.UpdateShortMessage{
		ID: m.ID, UserID: m.From.ID, Message: m.Text, Pts: n.Pts, PtsCount: n.PtsCount, Date: int(m.Date.Unix()),
	}
	if m.fwd != nil {
		v.SetFwdFrom(*m.fwd)
	}
	if m.ViaBot {
		v.SetViaBotID(m.Chat.s.opts.Bot.ID)
	}
	if m.ReplyTo != 0 {
		v.SetReplyTo(&tg.MessageReplyHeader{ReplyToMsgID: m.ReplyTo})
	}
	if len(m.Entities) > 0 {
		v.SetEntities(cloneEntities(m.Entities))
	}
	return v
}

// Send is a shorthand for u.In(chat).Text(ctx, text).
func (u *User) Send(ctx context.Context, chat *Chat, text string) (Message, error) {
	return u.In(chat).Text(ctx, text)
}
