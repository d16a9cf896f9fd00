package faketg

import (
	"context"
	"sync"
	"time"

	"github.com/go-faster/errors"

	"github.com/gotd/td/tg"
	"github.com/gotd/td/tgtest"
)

// messageService holds the chats' messages: it serves the bot's sends,
// edits, deletes, drafts, button answers and reads, and takes the users'
// messages and presses. Message IDs follow Telegram: private chats and
// basic groups share the bot's box (here), a supergroup or forum counts
// its own (in its Chat). Each Chat's messages, topics and draft setting
// are guarded by mu.
type messageService struct {
	s *Server

	mu        sync.Mutex
	nextMsgID int              // the common box
	box       map[int]*Message // the common box by message ID
	callbacks map[int64]*callbackRef
	commands  []tg.BotCommand
}

type callbackRef struct {
	chat     *Chat
	msgID    int
	user     *User
	answered bool
}

func newMessageService(s *Server) *messageService {
	return &messageService{s: s, box: map[int]*Message{}, callbacks: map[int64]*callbackRef{}}
}

func (m *messageService) register(d *tgtest.Dispatcher) {
	handle(d, tg.MessagesSendMessageRequestTypeID, m.sendMessage)
	handle(d, tg.MessagesSendMediaRequestTypeID, m.sendMedia)
	handle(d, tg.MessagesEditMessageRequestTypeID, m.editMessage)
	handle(d, tg.MessagesDeleteMessagesRequestTypeID, m.deleteMessages)
	handle(d, tg.ChannelsDeleteMessagesRequestTypeID, m.channelsDeleteMessages)
	handle(d, tg.MessagesGetMessagesRequestTypeID, m.getMessages)
	handle(d, tg.ChannelsGetMessagesRequestTypeID, m.channelsGetMessages)
	handle(d, tg.MessagesSetTypingRequestTypeID, m.setTyping)
	handle(d, tg.MessagesSetBotCallbackAnswerRequestTypeID, m.setBotCallbackAnswer)
	handle(d, tg.BotsSetBotCommandsRequestTypeID, m.setBotCommands)
}

// addLocked gives m its ID, stores it and, when the bot is in the chat,
// records its new-message update with the next pts. It returns that
// update (nil for a chat without the bot).
func (m *messageService) addLocked(msg *Message) tg.UpdateClass {
	c := msg.Chat
	switch {
	case !c.BotMember, c.Channel():
		c.nextMsgID++
		msg.ID = c.nextMsgID
	default:
		m.nextMsgID++
		msg.ID = m.nextMsgID
		m.box[msg.ID] = msg
	}
	c.msgs[msg.ID] = msg
	defer m.s.journal.notify()
	if !c.BotMember {
		return nil
	}
	return m.s.updates.add(c, func(pts int) tg.UpdateClass {
		if c.Channel() {
			return &tg.UpdateNewChannelMessage{Message: msg.tg(), Pts: pts, PtsCount: 1}
		}
		return &tg.UpdateNewMessage{Message: msg.tg(), Pts: pts, PtsCount: 1}
	})
}

// add adds msg, a user's message (see addLocked), and returns a copy of
// it. In a forum, a reply that names no topic goes in the topic of the
// message it replies to when inReplyTopic.
func (m *messageService) add(msg *Message, inReplyTopic bool) (Message, tg.UpdateClass) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if inReplyTopic {
		m.setTopicLocked(msg)
	}
	upd := m.addLocked(msg)
	return msg.clone(), upd
}

// pressable records button press qid, which the bot may answer once.
func (m *messageService) pressable(qid int64, ref *callbackRef) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.callbacks[qid] = ref
}

// setTopicLocked puts msg, a reply in a forum that names no topic, in the
// topic of the message it replies to.
func (m *messageService) setTopicLocked(msg *Message) {
	if msg.TopicID == 0 && msg.Chat.Kind == Forum && msg.ReplyTo != 0 {
		msg.TopicID = topicOfLocked(msg.Chat, msg.ReplyTo)
	}
}

// topicOfLocked is the forum topic of message id in chat (General if none).
func topicOfLocked(c *Chat, id int) int {
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

// commonChat is the chat of message id of the common box, nil if none.
func (m *messageService) commonChat(id int) *Chat {
	m.mu.Lock()
	defer m.mu.Unlock()
	if msg := m.box[id]; msg != nil {
		return msg.Chat
	}
	return nil
}

// pressed is the chat and message of button press qid, if the fake made
// it.
func (m *messageService) pressed(qid int64) (*Chat, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if q, ok := m.callbacks[qid]; ok {
		return q.chat, q.msgID
	}
	return nil, 0
}

// Topics are the forum's topics, General first.
func (c *Chat) Topics() []*Topic {
	c.s.messages.mu.Lock()
	defer c.s.messages.mu.Unlock()
	return append([]*Topic(nil), c.topics...)
}

// NewTopic creates a forum topic: a service message (messageActionTopicCreate)
// that is delivered to the bot, whose ID is the topic's ID.
func (c *Chat) NewTopic(ctx context.Context, title string) (*Topic, error) {
	if c.Kind != Forum {
		return nil, errors.Errorf("%s is not a forum", c)
	}
	s := c.s
	s.updates.pushMu.Lock()
	defer s.updates.pushMu.Unlock()
	s.messages.mu.Lock()
	c.nextMsgID++
	id := c.nextMsgID
	t := &Topic{Chat: c, ID: id, Title: title}
	c.topics = append(c.topics, t)
	now := time.Now()
	svc := &tg.MessageService{ID: id, PeerID: c.Peer(), Date: int(now.Unix()), Action: &tg.MessageActionTopicCreate{Title: title}}
	upd := s.updates.add(c, func(pts int) tg.UpdateClass {
		return &tg.UpdateNewChannelMessage{Message: svc, Pts: pts, PtsCount: 1}
	})
	s.messages.mu.Unlock()
	s.journal.notify()
	return t, s.updates.push(ctx, s.peers.wrap(upd))
}

// AllowDrafts overrides whether text drafts (messages.setTyping with
// sendMessageTextDraftAction) succeed in the chat. By default they do in
// private chats only (see Options.GroupDrafts).
func (c *Chat) AllowDrafts(allow bool) {
	c.s.messages.mu.Lock()
	defer c.s.messages.mu.Unlock()
	c.drafts = &allow
}

// Messages returns copies of the chat's messages in ID order, deleted ones
// included (Message.Deleted).
func (c *Chat) Messages() []Message {
	c.s.messages.mu.Lock()
	defer c.s.messages.mu.Unlock()
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
	c.s.messages.mu.Lock()
	defer c.s.messages.mu.Unlock()
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
	c.s.messages.mu.Lock()
	m, ok := c.msgs[id]
	deleted := ok && !m.Deleted
	if deleted {
		m.Deleted = true
	}
	c.s.messages.mu.Unlock()
	if deleted {
		c.s.journal.notify()
	}
	return deleted
}

// BotCommands is the command menu the bot set last (bots.setBotCommands).
func (s *Server) BotCommands() []tg.BotCommand {
	s.messages.mu.Lock()
	defer s.messages.mu.Unlock()
	return append([]tg.BotCommand(nil), s.messages.commands...)
}

func (m *messageService) setBotCommands(srv *tgtest.Server, req *tgtest.Request, r *tg.BotsSetBotCommandsRequest) error {
	ev := m.s.describe(r, time.Now())
	m.mu.Lock()
	m.commands = append([]tg.BotCommand(nil), r.Commands...)
	m.mu.Unlock()
	m.s.journal.record(ev)
	return srv.SendBool(req, true)
}
