package faketg

import (
	"context"
	"time"

	"github.com/go-faster/errors"

	"github.com/gotd/td/tg"
)

type callbackRef struct {
	chat     *Chat
	msgID    int
	user     *User
	answered bool
}

type guestRef struct {
	chat   *Chat
	user   *User
	msg    *Message
	answer *Message
}

// PressOptions tune User.Press.
type PressOptions struct {
	// NoWait returns as soon as the press is delivered, without waiting
	// for the bot's answer (Answer.QueryID still names the query).
	NoWait bool
}

// Answer is the bot's answer to a button press: its toast.
type Answer struct {
	QueryID int64
	// Text of the toast ("" for a bare answer).
	Text  string
	Alert bool
	URL   string
	Event Event
}

// Press presses an inline button of message msgID in chat with the given
// callback data (any bytes: it need not be a button of the message), and
// waits for the bot's messages.setBotCallbackAnswer. The bot gets
// updateBotCallbackQuery, which has no pts: a bot that is not connected
// never sees it, and Press waits until ctx ends.
func (u *User) Press(ctx context.Context, chat *Chat, msgID int, data []byte) (Answer, error) {
	return u.PressWith(ctx, chat, msgID, data, PressOptions{})
}

// PressWith is Press with options.
func (u *User) PressWith(ctx context.Context, chat *Chat, msgID int, data []byte, opts PressOptions) (Answer, error) {
	s := u.s
	s.pushMu.Lock()
	s.mu.Lock()
	s.nextQueryID++
	qid := s.nextQueryID<<20 | int64(u.ID&0xfffff)
	s.callbacks[qid] = &callbackRef{chat: chat, msgID: msgID, user: u}
	upd := &tg.UpdateBotCallbackQuery{
		QueryID: qid, UserID: u.ID, Peer: chat.Peer(), MsgID: msgID,
		ChatInstance: chat.ID*1000 + 7,
	}
	upd.SetData(data)
	out := s.updatesLocked(upd)
	since := len(s.log)
	s.mu.Unlock()
	err := s.push(ctx, out)
	s.pushMu.Unlock()
	if err != nil {
		return Answer{QueryID: qid}, err
	}
	if opts.NoWait {
		return Answer{QueryID: qid}, nil
	}
	return s.WaitAnswer(ctx, since, qid)
}

// WaitAnswer waits for the bot's answer to callback query qid after
// sequence number since (0: any).
func (s *Server) WaitAnswer(ctx context.Context, since int, qid int64) (Answer, error) {
	ev, err := s.WaitEvent(ctx, since, func(e Event) bool { return e.Kind == Toast && e.QueryID == qid })
	if err != nil {
		return Answer{QueryID: qid}, errors.Wrap(err, "wait for callback answer")
	}
	return Answer{QueryID: qid, Text: ev.Text, Alert: ev.Alert, URL: ev.URL, Event: ev}, nil
}

// StopDraft presses Stop on a draft the bot streams to u: the bot gets
// updateUserTyping{user_id: u, top_msg_id, action:
// sendMessageStopDraftAction{random_id}}. Pass the DraftInfo of a Draft
// event, or make one up (any RandomID) to spoof. Typing updates have no
// pts: a bot that is not connected never sees it.
func (u *User) StopDraft(ctx context.Context, d DraftInfo) error {
	s := u.s
	upd := &tg.UpdateUserTyping{UserID: u.ID, Action: &tg.SendMessageStopDraftAction{RandomID: d.RandomID}}
	if d.TopMsgID != 0 {
		upd.SetTopMsgID(d.TopMsgID)
	}
	s.pushMu.Lock()
	defer s.pushMu.Unlock()
	s.mu.Lock()
	out := s.updatesLocked(upd)
	s.mu.Unlock()
	return s.push(ctx, out)
}

// GuestQuery is a query to the bot from a chat it is not in.
type GuestQuery struct {
	ID int64
	// Message is the user's message that mentions the bot.
	Message Message
	s       *Server
}

// Guest sends text as u in chat, which the bot need not be a member of,
// and delivers it to the bot as a guest query: updateBotGuestChatQuery
// with the next qts (so a bot that is not connected gets it from
// updates.getDifference). refs become reference_messages (the message
// replied to, say). The bot answers with messages.setBotGuestChatResult
// (a GuestResult event) and edits with messages.editInlineBotMessage
// (InlineEdit events); Server.GuestAnswer has the posted answer.
func (u *User) Guest(ctx context.Context, chat *Chat, text string, refs ...Message) (*GuestQuery, error) {
	s := u.s
	s.pushMu.Lock()
	defer s.pushMu.Unlock()
	s.mu.Lock()
	now := time.Now()
	m := &Message{Chat: chat, From: u, Text: text, Entities: autoEntities(text), Date: now}
	if len(refs) > 0 && refs[0].Chat == chat {
		m.ReplyTo = refs[0].ID
	}
	if chat.BotMember {
		// The bot sees the message itself too.
		s.mu.Unlock()
		return nil, errors.Errorf("guest query in %s: the bot is a member; use a chat with NoBot", chat)
	}
	s.addMessageLocked(m)
	s.nextQueryID++
	qid := s.nextQueryID<<20 | int64(u.ID&0xfffff)
	s.queries[qid] = &guestRef{chat: chat, user: u, msg: m}
	s.qts++
	upd := &tg.UpdateBotGuestChatQuery{QueryID: qid, Message: m.tgGuest(), Qts: s.qts}
	if len(refs) > 0 {
		rm := make([]tg.MessageClass, 0, len(refs))
		for i := range refs {
			rm = append(rm, refs[i].tgGuest())
		}
		upd.SetReferenceMessages(rm)
	}
	s.qtsLog = append(s.qtsLog, qtsEntry{qts: s.qts, update: cloneUpdate(upd)})
	out := s.updatesLocked(upd)
	q := &GuestQuery{ID: qid, Message: m.clone(), s: s}
	s.mu.Unlock()
	return q, s.push(ctx, out)
}

// Answer waits for the bot's setBotGuestChatResult and returns the posted
// message.
func (q *GuestQuery) Answer(ctx context.Context) (Message, error) {
	_, err := q.s.WaitEvent(ctx, 0, func(e Event) bool { return e.Kind == GuestResult && e.QueryID == q.ID && e.OK() })
	if err != nil {
		return Message{}, errors.Wrap(err, "wait for guest answer")
	}
	m, _ := q.s.GuestAnswer(q.ID)
	return m, nil
}

// tgGuest is the message as a guest query carries it.
func (m *Message) tgGuest() *tg.Message {
	return m.tg()
}
