package faketg

import (
	"context"

	"github.com/go-faster/errors"

	"github.com/gotd/td/tg"
)

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
	s.updates.pushMu.Lock()
	qid := s.queryIDs.Add(1)<<20 | int64(u.ID&0xfffff)
	s.messages.pressable(qid, &callbackRef{chat: chat, msgID: msgID, user: u})
	upd := &tg.UpdateBotCallbackQuery{
		QueryID: qid, UserID: u.ID, Peer: chat.Peer(), MsgID: msgID,
		ChatInstance: chat.ID*1000 + 7,
	}
	upd.SetData(data)
	since := s.Seq()
	err := s.updates.push(ctx, s.peers.wrap(upd))
	s.updates.pushMu.Unlock()
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
	s.updates.pushMu.Lock()
	defer s.updates.pushMu.Unlock()
	return s.updates.push(ctx, s.peers.wrap(upd))
}
