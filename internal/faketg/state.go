package faketg

import (
	"fmt"

	"github.com/gotd/td/bin"
	"github.com/gotd/td/tg"
	"github.com/gotd/td/tgerr"
)

// botUser is the bot as users.getUsers returns it to itself.
func (s *Server) botUser() *tg.User {
	b := s.opts.Bot
	u := &tg.User{ID: b.ID}
	u.SetSelf(true)
	u.SetBot(true)
	u.SetAccessHash(b.ID ^ 0x5eed)
	u.SetFirstName(b.FirstName)
	if b.Username != "" && !b.NoUsername {
		u.SetUsername(b.Username)
	}
	if len(b.Aliases) > 0 {
		var names []tg.Username
		if b.Username != "" && !b.NoUsername {
			names = append(names, tg.Username{Editable: true, Active: true, Username: b.Username})
		}
		for _, a := range b.Aliases {
			names = append(names, tg.Username{Active: a.Active, Username: a.Username})
		}
		u.SetUsernames(names)
	}
	u.SetBotInfoVersion(1)
	return u
}

// botPeerUser is the bot as other users' updates carry it (no self flag).
func (s *Server) botPeerUser() *tg.User {
	u := s.botUser()
	u.Self = false
	return u
}

func (s *Server) tgUsersLocked() []tg.UserClass {
	out := make([]tg.UserClass, 0, len(s.userList)+1)
	out = append(out, s.botPeerUser())
	for _, u := range s.userList {
		out = append(out, u.tg())
	}
	return out
}

func (s *Server) tgChatsLocked() []tg.ChatClass {
	out := make([]tg.ChatClass, 0, len(s.chatList))
	for _, c := range s.chatList {
		if c.Kind != Private {
			out = append(out, c.tg())
		}
	}
	return out
}

func keyOf(kind ChatKind, id int64) chatKey {
	if kind == Forum {
		kind = Supergroup
	}
	return chatKey{kind: kind, id: id}
}

var errPeerInvalid = tgerr.New(400, "PEER_ID_INVALID")

// peerLocked resolves a peer of the bot's request, checking access hashes
// as Telegram does.
func (s *Server) peerLocked(p tg.InputPeerClass) (*Chat, *tgerr.Error) {
	switch p := p.(type) {
	case *tg.InputPeerUser:
		u, ok := s.users[p.UserID]
		if !ok || u.AccessHash != p.AccessHash {
			return nil, errPeerInvalid
		}
		return u.private, nil
	case *tg.InputPeerChat:
		c, ok := s.chats[keyOf(Group, p.ChatID)]
		if !ok {
			return nil, errPeerInvalid
		}
		if !c.BotMember {
			return c, tgerr.New(400, "CHAT_WRITE_FORBIDDEN")
		}
		return c, nil
	case *tg.InputPeerChannel:
		return s.channelLocked(&tg.InputChannel{ChannelID: p.ChannelID, AccessHash: p.AccessHash})
	default:
		return nil, errPeerInvalid
	}
}

func (s *Server) channelLocked(in tg.InputChannelClass) (*Chat, *tgerr.Error) {
	ch, ok := in.(*tg.InputChannel)
	if !ok {
		return nil, tgerr.New(400, "CHANNEL_INVALID")
	}
	c, ok := s.chats[keyOf(Supergroup, ch.ChannelID)]
	if !ok || c.AccessHash != ch.AccessHash {
		return nil, tgerr.New(400, "CHANNEL_INVALID")
	}
	if !c.BotMember {
		return c, tgerr.New(400, "CHANNEL_PRIVATE")
	}
	return c, nil
}

// commonMsgLocked finds a message of the bot's common box (private chats
// and groups).
func (s *Server) commonMsgLocked(id int) *Message {
	return s.box[id]
}

// setTopicLocked puts m, a reply in a forum that names no topic, in the
// topic of the message it replies to.
func (s *Server) setTopicLocked(m *Message) {
	if m.TopicID == 0 && m.Chat.Kind == Forum && m.ReplyTo != 0 {
		m.TopicID = s.topicOfLocked(m.Chat, m.ReplyTo)
	}
}

// topicOfLocked is the forum topic of message id in chat (General if none).
func (s *Server) topicOfLocked(c *Chat, id int) int {
	if m := c.msgs[id]; m != nil && m.TopicID != 0 {
		return m.TopicID
	}
	for _, t := range c.topics {
		if t.ID == id {
			return id
		}
	}
	return 0
}

// addMessageLocked gives m its ID, stores it and, when the bot is in the
// chat, records its new-message update with the next pts. It returns that
// update (nil for a chat without the bot).
func (s *Server) addMessageLocked(m *Message) tg.UpdateClass {
	c := m.Chat
	switch {
	case !c.BotMember:
		c.nextMsgID++
		m.ID = c.nextMsgID
	case c.Channel():
		c.nextMsgID++
		m.ID = c.nextMsgID
	default:
		s.nextMsgID++
		m.ID = s.nextMsgID
		s.box[m.ID] = m
	}
	c.msgs[m.ID] = m
	defer s.notifyLocked()
	if !c.BotMember {
		return nil
	}
	return s.addUpdateLocked(c, func(pts int) tg.UpdateClass {
		if c.Channel() {
			return &tg.UpdateNewChannelMessage{Message: m.tg(), Pts: pts, PtsCount: 1}
		}
		return &tg.UpdateNewMessage{Message: m.tg(), Pts: pts, PtsCount: 1}
	})
}

// addUpdateLocked records a pts update of chat's box with the next pts.
// The history keeps a copy: encoding a tg object writes its flags, so the
// returned update (which the caller sends) must not be shared.
func (s *Server) addUpdateLocked(c *Chat, mk func(pts int) tg.UpdateClass) tg.UpdateClass {
	if c.Channel() {
		c.pts++
		u := mk(c.pts)
		c.history = append(c.history, ptsEntry{pts: c.pts, update: cloneUpdate(u)})
		return u
	}
	s.pts++
	u := mk(s.pts)
	s.history = append(s.history, ptsEntry{pts: s.pts, update: cloneUpdate(u)})
	return u
}

// cloneUpdate deep-copies an update through its TL encoding.
func cloneUpdate(u tg.UpdateClass) tg.UpdateClass {
	var b bin.Buffer
	if err := u.Encode(&b); err != nil {
		panic(fmt.Sprintf("faketg: encode %T: %v", u, err))
	}
	c, err := tg.DecodeUpdate(&b)
	if err != nil {
		panic(fmt.Sprintf("faketg: decode %T: %v", u, err))
	}
	return c
}
