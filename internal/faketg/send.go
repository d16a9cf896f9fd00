package faketg

import (
	"reflect"
	"strings"
	"time"
	"unicode/utf16"

	"github.com/gotd/td/tg"
	"github.com/gotd/td/tgerr"
	"github.com/gotd/td/tgtest"
)

// Errors the fake answers with on its own, as Telegram does.
var (
	// ErrDraftRefused answers a text draft outside a private chat.
	// Telegram only streams drafts to users; its exact error there is not
	// documented, so a bot must treat any error of a draft as a refusal.
	ErrDraftRefused = tgerr.New(400, "PEER_ID_INVALID")
	// ErrMessageNotModified answers an edit that changes nothing.
	ErrMessageNotModified = tgerr.New(400, "MESSAGE_NOT_MODIFIED")
	// ErrMessageIDInvalid answers an edit of a deleted or unknown message.
	ErrMessageIDInvalid = tgerr.New(400, "MESSAGE_ID_INVALID")
)

const maxMessageUnits = 4096

// maxCaptionUnits is what a media message's caption holds (a bot's, or a
// user's without Premium).
const maxCaptionUnits = 1024

func utf16Len(s string) int { return len(utf16.Encode([]rune(s))) }

func (m *messageService) sendMessage(srv *tgtest.Server, req *tgtest.Request, r *tg.MessagesSendMessageRequest) error {
	now := time.Now()
	ev := m.s.describe(r, now)
	switch {
	case ev.Err != nil:
	case strings.TrimSpace(r.Message) == "":
		ev.Err = tgerr.New(400, "MESSAGE_EMPTY")
	case utf16Len(r.Message) > maxMessageUnits:
		ev.Err = tgerr.New(400, "MESSAGE_TOO_LONG")
	}
	if ev.Err != nil {
		m.s.journal.record(ev)
		return ev.Err
	}
	return m.send(srv, req, ev, &Message{
		Chat: ev.Chat, Out: true, Text: r.Message, Entities: r.Entities,
		ReplyTo: ev.ReplyTo, TopicID: ev.TopMsgID,
		Silent: r.Silent, NoWebpage: r.NoWebpage, Buttons: ev.Buttons, Date: now,
	}, r.RandomID)
}

func (m *messageService) sendMedia(srv *tgtest.Server, req *tgtest.Request, r *tg.MessagesSendMediaRequest) error {
	now := time.Now()
	md, ferr := m.s.files.inputMedia(r.Media)
	ev := m.s.describe(r, now)
	if ev.Err == nil && ferr != nil {
		ev.Err = ferr
	}
	if ev.Err == nil && utf16Len(r.Message) > maxCaptionUnits {
		ev.Err = tgerr.New(400, "MEDIA_CAPTION_TOO_LONG")
	}
	if ev.Err != nil {
		m.s.journal.record(ev)
		return ev.Err
	}
	m.s.files.addMedia(md)
	ev.Media = md
	return m.send(srv, req, ev, &Message{
		Chat: ev.Chat, Out: true, Text: r.Message, Entities: r.Entities,
		ReplyTo: ev.ReplyTo, TopicID: ev.TopMsgID, Silent: r.Silent,
		Buttons: ev.Buttons, Media: md, Date: now,
	}, r.RandomID)
}

// send adds msg, a message the bot sends, records ev, the event of its
// request, and answers with the sent result.
func (m *messageService) send(srv *tgtest.Server, req *tgtest.Request, ev Event, msg *Message, randomID int64) error {
	m.mu.Lock()
	m.setTopicLocked(msg)
	upd := m.addLocked(msg)
	ev.MsgID = msg.ID
	res := m.sentResultLocked(msg, upd, randomID)
	m.s.journal.record(ev)
	m.mu.Unlock()
	return srv.SendResult(req, res)
}

// sentResultLocked is the result of sending msg: updateShortSentMessage in
// private chats and groups, Updates with the message in channels.
func (m *messageService) sentResultLocked(msg *Message, upd tg.UpdateClass, randomID int64) tg.UpdatesClass {
	if !msg.Chat.Channel() && msg.Media == nil {
		u := upd.(*tg.UpdateNewMessage)
		res := &tg.UpdateShortSentMessage{Out: true, ID: msg.ID, Pts: u.Pts, PtsCount: u.PtsCount, Date: int(msg.Date.Unix())}
		if len(msg.Entities) > 0 {
			res.SetEntities(cloneEntities(msg.Entities))
		}
		return res
	}
	res := m.s.peers.wrap(&tg.UpdateMessageID{ID: msg.ID, RandomID: randomID}, upd)
	res.Date = int(msg.Date.Unix())
	return res
}

func (m *messageService) editMessage(srv *tgtest.Server, req *tgtest.Request, r *tg.MessagesEditMessageRequest) error {
	now := time.Now()
	ev := m.s.describe(r, now)
	m.mu.Lock()
	var msg *Message
	if ev.Err == nil {
		msg = ev.Chat.msgs[r.ID]
		_, hasText := r.GetMessage()
		text := msg.textOr(r.Message, hasText)
		switch {
		case msg == nil || msg.Deleted:
			ev.Err = ErrMessageIDInvalid
		case !msg.Out:
			ev.Err = tgerr.New(403, "MESSAGE_AUTHOR_REQUIRED")
		case hasText && strings.TrimSpace(text) == "" && msg.Media == nil:
			ev.Err = tgerr.New(400, "MESSAGE_EMPTY")
		case utf16Len(text) > maxMessageUnits:
			ev.Err = tgerr.New(400, "MESSAGE_TOO_LONG")
		case text == msg.Text && equalButtons(ev.Buttons, msg.Buttons) && equalEntities(r.Entities, msg.Entities) && r.Media == nil:
			ev.Err = ErrMessageNotModified
		}
	}
	if ev.Err != nil {
		m.mu.Unlock()
		m.s.journal.record(ev)
		return ev.Err
	}
	if _, ok := r.GetMessage(); ok {
		msg.Text, msg.Entities = r.Message, r.Entities
	}
	msg.Buttons = ev.Buttons
	msg.NoWebpage = r.NoWebpage
	msg.Edited = now
	msg.Edits++
	upd := m.s.updates.add(msg.Chat, func(pts int) tg.UpdateClass {
		if msg.Chat.Channel() {
			return &tg.UpdateEditChannelMessage{Message: msg.tg(), Pts: pts, PtsCount: 1}
		}
		return &tg.UpdateEditMessage{Message: msg.tg(), Pts: pts, PtsCount: 1}
	})
	m.s.journal.record(ev)
	m.mu.Unlock()
	res := m.s.peers.wrap(upd)
	res.Date = int(now.Unix())
	return srv.SendResult(req, res)
}

func (m *Message) textOr(text string, has bool) string {
	if has || m == nil {
		return text
	}
	return m.Text
}

func equalButtons(a, b [][]Button) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return reflect.DeepEqual(a, b)
}

func equalEntities(a, b []tg.MessageEntityClass) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return reflect.DeepEqual(a, b)
}

func (m *messageService) deleteMessages(srv *tgtest.Server, req *tgtest.Request, r *tg.MessagesDeleteMessagesRequest) error {
	ev := m.s.describe(r, time.Now())
	m.mu.Lock()
	ids := markDeleted(r.ID, func(id int) *Message { return m.box[id] })
	m.mu.Unlock()
	m.s.journal.record(ev)
	return srv.SendResult(req, m.s.updates.deleted(nil, ids))
}

func (m *messageService) channelsDeleteMessages(srv *tgtest.Server, req *tgtest.Request, r *tg.ChannelsDeleteMessagesRequest) error {
	ev := m.s.describe(r, time.Now())
	chat, err := m.s.peers.channel(r.Channel)
	if err != nil {
		ev.Err = err
		m.s.journal.record(ev)
		return err
	}
	m.mu.Lock()
	ids := markDeleted(r.ID, func(id int) *Message { return chat.msgs[id] })
	m.mu.Unlock()
	m.s.journal.record(ev)
	return srv.SendResult(req, m.s.updates.deleted(chat, ids))
}

// markDeleted marks the messages of ids that get finds deleted, and returns
// the ids of those that were not already.
func markDeleted(ids []int, get func(int) *Message) []int {
	var out []int
	for _, id := range ids {
		if m := get(id); m != nil && !m.Deleted {
			m.Deleted = true
			out = append(out, id)
		}
	}
	return out
}

func (m *messageService) getMessages(srv *tgtest.Server, req *tgtest.Request, r *tg.MessagesGetMessagesRequest) error {
	m.s.journal.call("messages.getMessages", r)
	m.mu.Lock()
	msgs := inputMessagesLocked(r.ID, func(id int) *Message { return m.box[id] })
	m.mu.Unlock()
	return srv.SendResult(req, &tg.MessagesMessages{
		Messages: msgs, Topics: []tg.ForumTopicClass{},
		Chats: m.s.peers.tgChats(), Users: m.s.peers.tgUsers(),
	})
}

func (m *messageService) channelsGetMessages(srv *tgtest.Server, req *tgtest.Request, r *tg.ChannelsGetMessagesRequest) error {
	m.s.journal.call("channels.getMessages", r)
	chat, err := m.s.peers.channel(r.Channel)
	if err != nil {
		return err
	}
	m.mu.Lock()
	msgs := inputMessagesLocked(r.ID, func(id int) *Message { return chat.msgs[id] })
	m.mu.Unlock()
	return srv.SendResult(req, &tg.MessagesChannelMessages{
		Pts: m.s.updates.channelPts(chat), Count: len(msgs),
		Messages: msgs, Topics: []tg.ForumTopicClass{},
		Chats: m.s.peers.tgChats(), Users: m.s.peers.tgUsers(),
	})
}

func inputMessagesLocked(ids []tg.InputMessageClass, get func(int) *Message) []tg.MessageClass {
	out := make([]tg.MessageClass, 0, len(ids))
	for _, in := range ids {
		var m *Message
		switch in := in.(type) {
		case *tg.InputMessageID:
			m = get(in.ID)
		case *tg.InputMessageReplyTo:
			if src := get(in.ID); src != nil && src.ReplyTo != 0 {
				m = get(src.ReplyTo)
			}
		}
		if m == nil || m.Deleted {
			id := 0
			if v, ok := in.(*tg.InputMessageID); ok {
				id = v.ID
			}
			out = append(out, &tg.MessageEmpty{ID: id})
			continue
		}
		out = append(out, m.tg())
	}
	return out
}

func (m *messageService) setTyping(srv *tgtest.Server, req *tgtest.Request, r *tg.MessagesSetTypingRequest) error {
	ev := m.s.describe(r, time.Now())
	if ev.Err == nil && ev.Kind == Draft && !m.draftsAllowed(ev.Chat) {
		ev.Err = ErrDraftRefused
	}
	m.s.journal.record(ev)
	if ev.Err != nil {
		return ev.Err
	}
	return srv.SendBool(req, true)
}

func (m *messageService) draftsAllowed(c *Chat) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c.drafts != nil {
		return *c.drafts
	}
	return c.Kind == Private || m.s.opts.GroupDrafts
}

func (m *messageService) setBotCallbackAnswer(srv *tgtest.Server, req *tgtest.Request, r *tg.MessagesSetBotCallbackAnswerRequest) error {
	ev := m.s.describe(r, time.Now())
	m.mu.Lock()
	q, ok := m.callbacks[r.QueryID]
	switch {
	case !ok, q.answered:
		ev.Err = tgerr.New(400, "QUERY_ID_INVALID")
	default:
		q.answered = true
	}
	m.mu.Unlock()
	m.s.journal.record(ev)
	if ev.Err != nil {
		return ev.Err
	}
	return srv.SendBool(req, true)
}
