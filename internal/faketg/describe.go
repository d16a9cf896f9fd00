package faketg

import (
	"time"

	"github.com/gotd/td/bin"
	"github.com/gotd/td/tg"
)

// describe is the Event of a request served at now: the fields that come
// from the request, and the chat, message or query it names. It takes the
// services' locks in turn, so its caller must hold none.
func (s *Server) describe(obj bin.Object, now time.Time) Event {
	ev := Event{Time: now, Kind: Call, Request: obj}
	if t, ok := obj.(interface{ TypeID() uint32 }); ok {
		ev.Method = methodName(t.TypeID())
	}
	peer := func(p tg.InputPeerClass) {
		c, err := s.peers.resolve(p)
		ev.Chat = c
		if err != nil && ev.Err == nil {
			ev.Err = err
		}
	}
	replyTo := func(r tg.InputReplyToClass) {
		if h, ok := r.(*tg.InputReplyToMessage); ok {
			ev.ReplyTo = h.ReplyToMsgID
			ev.TopMsgID = h.TopMsgID
		}
	}
	markup := func(rm tg.ReplyMarkupClass) {
		if rm != nil {
			ev.HasMarkup, ev.Buttons = true, markupButtons(rm)
		}
	}
	switch r := obj.(type) {
	case *tg.MessagesSendMessageRequest:
		ev.Kind = Send
		peer(r.Peer)
		replyTo(r.ReplyTo)
		ev.Text, ev.Entities = r.Message, r.Entities
		ev.Silent, ev.NoWebpage = r.Silent, r.NoWebpage
		markup(r.ReplyMarkup)
	case *tg.MessagesEditMessageRequest:
		ev.Kind = Edit
		peer(r.Peer)
		ev.MsgID = r.ID
		ev.Text, ev.Entities = r.Message, r.Entities
		ev.NoWebpage = r.NoWebpage
		markup(r.ReplyMarkup)
	case *tg.MessagesSendMediaRequest:
		ev.Kind = Upload
		peer(r.Peer)
		replyTo(r.ReplyTo)
		ev.Text, ev.Entities = r.Message, r.Entities
		ev.Silent = r.Silent
		markup(r.ReplyMarkup)
	case *tg.MessagesSetTypingRequest:
		peer(r.Peer)
		ev.TopMsgID = r.TopMsgID
		ev.Kind = Typing
		ev.Action = r.Action
		if a, ok := r.Action.(*tg.SendMessageTextDraftAction); ok {
			ev.Kind = Draft
			ev.Text, ev.Entities = a.Text.Text, a.Text.Entities
			ev.Draft = &DraftInfo{RandomID: a.RandomID, CanStop: a.CanStop, KeepOnStop: a.KeepOnStop, TopMsgID: r.TopMsgID, Chat: ev.Chat}
		}
	case *tg.MessagesDeleteMessagesRequest:
		ev.Kind = Delete
		ev.MsgIDs = r.ID
		if len(r.ID) > 0 {
			ev.Chat = s.messages.commonChat(r.ID[0])
		}
	case *tg.ChannelsDeleteMessagesRequest:
		ev.Kind = Delete
		ev.MsgIDs = r.ID
		ev.Chat, _ = s.peers.channel(r.Channel)
	case *tg.MessagesSetBotCallbackAnswerRequest:
		ev.Kind = Toast
		ev.QueryID, ev.Text, ev.Alert, ev.URL = r.QueryID, r.Message, r.Alert, r.URL
		ev.Chat, ev.MsgID = s.messages.pressed(r.QueryID)
	case *tg.BotsSetBotCommandsRequest:
		ev.Kind = Commands
		ev.Commands, ev.Scope, ev.LangCode = r.Commands, r.Scope, r.LangCode
	case *tg.MessagesSetBotGuestChatResultRequest:
		ev.Kind = GuestResult
		ev.QueryID = r.QueryID
		ev.Chat = s.guests.queryChat(r.QueryID)
		if res, ok := r.Result.(*tg.InputBotInlineResult); ok {
			if m, ok := res.SendMessage.(*tg.InputBotInlineMessageText); ok {
				ev.Text, ev.Entities, ev.NoWebpage = m.Message, m.Entities, m.NoWebpage
				markup(m.ReplyMarkup)
			}
		}
	case *tg.MessagesEditInlineBotMessageRequest:
		ev.Kind = InlineEdit
		ev.Text, ev.Entities, ev.NoWebpage = r.Message, r.Entities, r.NoWebpage
		markup(r.ReplyMarkup)
		if id, ok := r.ID.(*tg.InputBotInlineMessageID64); ok {
			ev.InlineID = id
			ev.Chat, ev.QueryID = s.guests.answerOf(id)
		}
	}
	return ev
}
