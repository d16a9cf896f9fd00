package faketg

import (
	"context"
	"fmt"
	"time"

	"github.com/go-faster/errors"
	"go.uber.org/zap"

	"github.com/gotd/td/proto"
	"github.com/gotd/td/tg"
)

// NewUser adds a user. It panics on an ID already taken, a test bug.
func (s *Server) NewUser(opts UserOptions) *User {
	s.mu.Lock()
	defer s.mu.Unlock()
	if opts.ID == 0 {
		for s.users[s.nextUserID] != nil {
			s.nextUserID++
		}
		opts.ID = s.nextUserID
		s.nextUserID++
	}
	if _, ok := s.users[opts.ID]; ok || opts.ID == s.opts.Bot.ID {
		panic(fmt.Sprintf("faketg: user ID %d taken", opts.ID))
	}
	if opts.FirstName == "" {
		opts.FirstName = fmt.Sprintf("User%d", opts.ID)
	}
	u := &User{
		s: s, ID: opts.ID, AccessHash: opts.ID*7 + 13,
		FirstName: opts.FirstName, Username: opts.Username, Admin: opts.Admin,
	}
	u.private = &Chat{s: s, Kind: Private, ID: u.ID, User: u, BotMember: true, msgs: map[int]*Message{}}
	s.users[u.ID] = u
	s.userList = append(s.userList, u)
	s.chats[keyOf(Private, u.ID)] = u.private
	s.chatList = append(s.chatList, u.private)
	return u
}

// Admins are the IDs of the users labelled Admin.
func (s *Server) Admins() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []int64
	for _, u := range s.userList {
		if u.Admin {
			ids = append(ids, u.ID)
		}
	}
	return ids
}

// User finds a user by ID.
func (s *Server) User(id int64) (*User, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.users[id]
	return u, ok
}

// Users are the fake's users in the order they were added.
func (s *Server) Users() []*User {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*User(nil), s.userList...)
}

// Chats are the fake's chats in the order they were added, each user's
// private chat included.
func (s *Server) Chats() []*Chat {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Chat(nil), s.chatList...)
}

// Chat finds a chat by its Bot API ID (Chat.BotAPIID), which tells the
// kinds apart.
func (s *Server) Chat(botAPIID int64) (*Chat, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var k chatKey
	switch {
	case botAPIID > 0:
		k = keyOf(Private, botAPIID)
	case botAPIID < -1000000000000:
		k = keyOf(Supergroup, -1000000000000-botAPIID)
	default:
		k = keyOf(Group, -botAPIID)
	}
	c, ok := s.chats[k]
	return c, ok
}

// ChatOptions describe a new group, supergroup or forum.
type ChatOptions struct {
	// Title defaults to "Group <ID>".
	Title string
	// NoBot makes a chat the bot is not a member of, for guest queries:
	// messages there are not delivered to the bot, and it cannot send.
	NoBot bool
}

// NewChat adds a group, supergroup or forum. kind must not be Private
// (use User.Private).
func (s *Server) NewChat(kind ChatKind, opts ChatOptions) *Chat {
	if kind == Private {
		panic("faketg: NewChat(Private): use User.Private")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.nextChatID
	s.nextChatID++
	if opts.Title == "" {
		opts.Title = fmt.Sprintf("Group %d", id)
	}
	c := &Chat{
		s: s, Kind: kind, ID: id, Title: opts.Title, BotMember: !opts.NoBot,
		msgs: map[int]*Message{},
	}
	if c.Channel() {
		c.AccessHash = id*11 + 3
	}
	if kind == Forum {
		// The General topic.
		c.topics = append(c.topics, &Topic{Chat: c, ID: GeneralTopicID, Title: "General"})
		c.nextMsgID = GeneralTopicID
	}
	s.chats[keyOf(kind, id)] = c
	s.chatList = append(s.chatList, c)
	return c
}

// NewGroup adds a basic group with the bot in it.
func (s *Server) NewGroup(title string) *Chat { return s.NewChat(Group, ChatOptions{Title: title}) }

// NewSupergroup adds a supergroup with the bot in it.
func (s *Server) NewSupergroup(title string) *Chat {
	return s.NewChat(Supergroup, ChatOptions{Title: title})
}

// NewForum adds a forum (supergroup with topics) with the bot in it.
func (s *Server) NewForum(title string) *Chat { return s.NewChat(Forum, ChatOptions{Title: title}) }

// Topics are the forum's topics, General first.
func (c *Chat) Topics() []*Topic {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return append([]*Topic(nil), c.topics...)
}

// NewTopic creates a forum topic: a service message (messageActionTopicCreate)
// that is delivered to the bot, whose ID is the topic's ID.
func (c *Chat) NewTopic(ctx context.Context, title string) (*Topic, error) {
	if c.Kind != Forum {
		return nil, errors.Errorf("%s is not a forum", c)
	}
	s := c.s
	s.pushMu.Lock()
	defer s.pushMu.Unlock()
	s.mu.Lock()
	c.nextMsgID++
	id := c.nextMsgID
	t := &Topic{Chat: c, ID: id, Title: title}
	c.topics = append(c.topics, t)
	now := time.Now()
	svc := &tg.MessageService{ID: id, PeerID: c.Peer(), Date: int(now.Unix()), Action: &tg.MessageActionTopicCreate{Title: title}}
	upd := s.addUpdateLocked(c, func(pts int) tg.UpdateClass {
		return &tg.UpdateNewChannelMessage{Message: svc, Pts: pts, PtsCount: 1}
	})
	s.notifyLocked()
	out := s.updatesLocked(upd)
	s.mu.Unlock()
	return t, s.push(ctx, out)
}

// AllowDrafts overrides whether text drafts (messages.setTyping with
// sendMessageTextDraftAction) succeed in the chat. By default they do in
// private chats only (see Options.GroupDrafts).
func (c *Chat) AllowDrafts(allow bool) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	c.drafts = &allow
}

// Messages returns copies of the chat's messages in ID order, deleted ones
// included (Message.Deleted).
func (c *Chat) Messages() []Message {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	var out []Message
	for id := 1; id <= c.maxIDLocked(); id++ {
		if m, ok := c.msgs[id]; ok {
			out = append(out, m.clone())
		}
	}
	return out
}

func (c *Chat) maxIDLocked() int {
	n := 0
	for id := range c.msgs {
		n = max(n, id)
	}
	return n
}

// Message returns a copy of message id of the chat.
func (c *Chat) Message(id int) (Message, bool) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	m, ok := c.msgs[id]
	if !ok {
		return Message{}, false
	}
	return m.clone(), true
}

// Delete deletes a message as its author or an admin would. The bot gets
// no update (Telegram sends bots none); its later edits of the message
// fail with MESSAGE_ID_INVALID.
func (c *Chat) Delete(id int) bool {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	m, ok := c.msgs[id]
	if !ok || m.Deleted {
		return false
	}
	m.Deleted = true
	c.s.notifyLocked()
	return true
}

// GuestAnswer returns the message the bot posted for a guest query, in its
// current state.
func (s *Server) GuestAnswer(queryID int64) (Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, ok := s.queries[queryID]
	if !ok || q.answer == nil {
		return Message{}, false
	}
	return q.answer.clone(), true
}

// BotCommands is the command menu the bot set last (bots.setBotCommands).
func (s *Server) BotCommands() []tg.BotCommand {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]tg.BotCommand(nil), s.commands...)
}

// SetBotProfile changes the bot's names, as BotFather or Fragment would:
// users.getUsers returns them from then on.
func (s *Server) SetBotProfile(username string, aliases ...Alias) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opts.Bot.Username = username
	s.opts.Bot.NoUsername = username == ""
	s.opts.Bot.Aliases = append([]Alias(nil), aliases...)
}

// BotUsername is the bot's primary username.
func (s *Server) BotUsername() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opts.Bot.Username
}

// updatesLocked wraps updates with every user and chat.
func (s *Server) updatesLocked(u ...tg.UpdateClass) *tg.Updates {
	return &tg.Updates{
		Updates: u,
		Users:   s.tgUsersLocked(),
		Chats:   s.tgChatsLocked(),
		Date:    int(time.Now().Unix()),
	}
}

// push sends updates to the bot's connection. A bot that is not connected
// misses them; pts/qts updates then reach it through getDifference, as
// on Telegram. s.pushMu must be held, s.mu not.
func (s *Server) push(ctx context.Context, u tg.UpdatesClass) error {
	s.mu.Lock()
	sess, ok := s.session, s.hasSession
	s.mu.Unlock()
	if !ok {
		return nil
	}
	if err := s.srv.Send(ctx, sess, proto.MessageFromServer, u); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.lg.Debug("Push failed; the bot will catch up", zap.Error(err))
		s.mu.Lock()
		if s.session.ID == sess.ID {
			s.connected = false
		}
		s.mu.Unlock()
	}
	return nil
}

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
	s := b.u.s
	s.pushMu.Lock()
	defer s.pushMu.Unlock()
	s.mu.Lock()
	now := time.Now()
	ents := b.entities
	if ents == nil {
		ents = autoEntities(text)
	}
	m := &Message{
		Chat: b.chat, From: b.u, Text: text, Entities: ents,
		ReplyTo: b.replyTo, TopicID: b.topic, Date: now, fwd: b.fwd, Forwarded: b.fwd != nil,
		ViaBot: b.viaBot,
	}
	s.setTopicLocked(m)
	if b.chat.Kind == Private && b.chat.User != b.u {
		s.mu.Unlock()
		return Message{}, errors.Errorf("%s cannot write in %s", b.u, b.chat)
	}
	if md := b.media; md != nil {
		c := *md
		s.addMediaLocked(&c)
		m.Media = &c
	}
	upd := s.addMessageLocked(m)
	out := m.clone()
	var u tg.UpdatesClass
	if upd != nil {
		u = s.updatesLocked(upd)
		if s.opts.ShortUpdates && b.chat.Kind == Private && m.Media == nil {
			u = shortMessage(m, upd)
		}
	}
	s.mu.Unlock()
	if u == nil {
		return out, nil
	}
	return out, s.push(ctx, u)
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
