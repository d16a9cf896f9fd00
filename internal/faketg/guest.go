package faketg

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/go-faster/errors"

	"github.com/gotd/td/tg"
	"github.com/gotd/td/tgerr"
	"github.com/gotd/td/tgtest"
)

// guestService holds the guest queries (a user's mention of the bot in a
// chat it is not in) and the bot's answers to them, which it posts with
// messages.setBotGuestChatResult and edits as inline messages.
type guestService struct {
	s *Server

	mu         sync.Mutex
	queries    map[int64]*guestRef // by query ID
	inline     map[int64]*Message  // the answers, by InputBotInlineMessageID64.ID
	nextInline int
}

type guestRef struct {
	chat   *Chat
	user   *User
	msg    *Message
	answer *Message
}

func newGuestService(s *Server) *guestService {
	return &guestService{s: s, queries: map[int64]*guestRef{}, inline: map[int64]*Message{}}
}

func (g *guestService) register(d *tgtest.Dispatcher) {
	handle(d, tg.MessagesSetBotGuestChatResultRequestTypeID, g.setBotGuestChatResult)
	handle(d, tg.MessagesEditInlineBotMessageRequestTypeID, g.editInlineBotMessage)
}

// queryChat is the chat of guest query qid, nil if the fake made none.
func (g *guestService) queryChat(qid int64) *Chat {
	g.mu.Lock()
	defer g.mu.Unlock()
	if q, ok := g.queries[qid]; ok {
		return q.chat
	}
	return nil
}

// answerOf is the chat and query of the guest answer id, if any.
func (g *guestService) answerOf(id *tg.InputBotInlineMessageID64) (*Chat, int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if m, ok := g.inline[int64(id.ID)]; ok {
		return m.Chat, m.GuestQuery
	}
	return nil, 0
}

// GuestAnswer returns the message the bot posted for a guest query, in its
// current state.
func (s *Server) GuestAnswer(queryID int64) (Message, bool) {
	s.guests.mu.Lock()
	defer s.guests.mu.Unlock()
	q, ok := s.guests.queries[queryID]
	if !ok || q.answer == nil {
		return Message{}, false
	}
	return q.answer.clone(), true
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
	if chat.BotMember {
		// The bot sees the message itself too.
		return nil, errors.Errorf("guest query in %s: the bot is a member; use a chat with NoBot", chat)
	}
	s := u.s
	s.updates.pushMu.Lock()
	defer s.updates.pushMu.Unlock()
	m := &Message{Chat: chat, From: u, Text: text, Entities: autoEntities(text), Date: time.Now()}
	if len(refs) > 0 && refs[0].Chat == chat {
		m.ReplyTo = refs[0].ID
	}
	out, _ := s.messages.add(m, false)
	q := &GuestQuery{ID: s.queryIDs.Add(1)<<20 | int64(u.ID&0xfffff), Message: out, s: s}
	msg := out.tgGuest()
	s.guests.mu.Lock()
	s.guests.queries[q.ID] = &guestRef{chat: chat, user: u, msg: m}
	s.guests.mu.Unlock()
	upd := s.updates.addQts(func(qts int) tg.UpdateClass {
		upd := &tg.UpdateBotGuestChatQuery{QueryID: q.ID, Message: msg, Qts: qts}
		if len(refs) > 0 {
			rm := make([]tg.MessageClass, 0, len(refs))
			for i := range refs {
				rm = append(rm, refs[i].tgGuest())
			}
			upd.SetReferenceMessages(rm)
		}
		return upd
	})
	return q, s.updates.push(ctx, s.peers.wrap(upd))
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

func (g *guestService) setBotGuestChatResult(srv *tgtest.Server, req *tgtest.Request, r *tg.MessagesSetBotGuestChatResultRequest) error {
	now := time.Now()
	ev := g.s.describe(r, now)
	g.mu.Lock()
	q, ok := g.queries[r.QueryID]
	switch {
	case !ok || q.answer != nil:
		ev.Err = tgerr.New(400, "QUERY_ID_INVALID")
	case strings.TrimSpace(ev.Text) == "":
		ev.Err = tgerr.New(400, "MESSAGE_EMPTY")
	}
	if ev.Err != nil {
		g.mu.Unlock()
		g.s.journal.record(ev)
		return ev.Err
	}
	g.nextInline++
	id := &tg.InputBotInlineMessageID64{DCID: g.s.opts.DC, OwnerID: q.chat.ID, ID: g.nextInline, AccessHash: int64(g.nextInline) * 7919}
	m := &Message{
		ID: id.ID, Chat: q.chat, Out: true, Text: ev.Text, Entities: ev.Entities,
		NoWebpage: ev.NoWebpage, Buttons: ev.Buttons, Date: now, InlineID: id, GuestQuery: r.QueryID,
	}
	q.answer = m
	g.inline[int64(id.ID)] = m
	ev.InlineID = id
	g.s.journal.record(ev)
	g.mu.Unlock()
	return srv.SendResult(req, id)
}

func (g *guestService) editInlineBotMessage(srv *tgtest.Server, req *tgtest.Request, r *tg.MessagesEditInlineBotMessageRequest) error {
	now := time.Now()
	md, ferr := g.s.files.inlineMedia(r)
	ev := g.s.describe(r, now)
	ev.Media = md
	g.mu.Lock()
	var m *Message
	if ev.InlineID != nil {
		m = g.inline[int64(ev.InlineID.ID)]
	}
	_, hasText := r.GetMessage()
	switch {
	case m == nil || m.Deleted || m.InlineID.AccessHash != ev.InlineID.AccessHash:
		ev.Err = ErrMessageIDInvalid
	case ferr != nil:
		ev.Err = ferr
	case md == nil && m.Media == nil && hasText && strings.TrimSpace(r.Message) == "":
		ev.Err = tgerr.New(400, "MESSAGE_EMPTY")
	case (md != nil || m.Media != nil) && utf16Len(m.textOr(r.Message, hasText)) > maxCaptionUnits:
		ev.Err = tgerr.New(400, "MEDIA_CAPTION_TOO_LONG")
	case utf16Len(m.textOr(r.Message, hasText)) > maxMessageUnits:
		ev.Err = tgerr.New(400, "MESSAGE_TOO_LONG")
	case md == nil && m.textOr(r.Message, hasText) == m.Text && equalButtons(ev.Buttons, m.Buttons) && equalEntities(r.Entities, m.Entities):
		ev.Err = ErrMessageNotModified
	}
	if ev.Err != nil {
		g.mu.Unlock()
		g.s.journal.record(ev)
		return ev.Err
	}
	if hasText {
		m.Text, m.Entities = r.Message, r.Entities
	}
	if md != nil {
		m.Media = md
	}
	m.Buttons = ev.Buttons
	m.Edited = now
	m.Edits++
	g.s.journal.record(ev)
	g.mu.Unlock()
	return srv.SendBool(req, true)
}
