package faketg

import (
	"fmt"
	"reflect"
	"strings"
	"time"
	"unicode/utf16"

	"github.com/go-faster/errors"
	"go.uber.org/zap"

	"github.com/gotd/td/bin"
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

// methodName is the TL name of a type ID, without its "#id" suffix.
func methodName(id uint32) string {
	name, ok := typeNames[id]
	if !ok {
		return "unknown#" + strings.TrimLeft(strings.ToLower(errors.Errorf("%x", id).Error()), "0")
	}
	if i := strings.IndexByte(name, '#'); i >= 0 {
		name = name[:i]
	}
	return name
}

var (
	typeNames   = tg.TypesMap()
	typeDecoder = tg.TypesConstructorMap()
)

// serve runs before every method: authorization, the push session and
// injected faults.
func (s *Server) serve(srv *tgtest.Server, req *tgtest.Request) error {
	id, err := req.Buf.PeekID()
	if err != nil {
		return err
	}
	name := methodName(id)
	s.mu.Lock()
	authorized := s.authorized[req.Session.AuthKey.ID]
	// Updates go to the newest connection of the key that logged in, not
	// to connections made by auth transfer (telegram.Client.DC).
	if authorized && req.Session.AuthKey.ID == s.mainKey {
		if !s.hasSession || s.session.ID != req.Session.ID {
			// A new connection (a restarted bot, or a reconnect): it gets
			// pushes once its updates manager asked for the state.
			s.lg.Debug("Bot session", zap.Int64("session_id", req.Session.ID))
			s.connected = false
		}
		s.session = req.Session
		s.hasSession = true
	}
	hasFault := len(s.faults[id]) > 0
	hasHold := len(s.holds[id]) > 0
	s.mu.Unlock()
	if !authorized && !strings.HasPrefix(name, "auth.") && !strings.HasPrefix(name, "help.") {
		return tgerr.New(401, "AUTH_KEY_UNREGISTERED")
	}
	if hasHold {
		obj, err := decodeRequest(id, req.Buf)
		if err != nil {
			return err
		}
		s.mu.Lock()
		h := s.takeHoldLocked(id, obj)
		s.mu.Unlock()
		if h != nil {
			close(h.held)
			<-h.release
		}
	}
	if hasFault {
		obj, err := decodeRequest(id, req.Buf)
		if err != nil {
			return err
		}
		now := time.Now()
		s.mu.Lock()
		ferr := s.takeFaultLocked(id, obj)
		if ferr != nil {
			ev := s.describeLocked(obj, now)
			ev.Err = ferr
			s.recordLocked(ev)
		}
		s.mu.Unlock()
		if ferr != nil {
			return ferr
		}
	}
	return s.dc.OnMessage(srv, req)
}

// decodeRequest decodes a request without consuming buf.
func decodeRequest(id uint32, buf *bin.Buffer) (bin.Object, error) {
	ctor, ok := typeDecoder[id]
	if !ok {
		return nil, errors.Errorf("unknown type %#x", id)
	}
	obj := ctor()
	b := &bin.Buffer{Buf: buf.Copy()}
	if err := obj.Decode(b); err != nil {
		return nil, errors.Wrapf(err, "decode %s", methodName(id))
	}
	return obj, nil
}

// unknown is the fallback of the common dispatcher: methods the fake does
// not serve.
func (s *Server) unknown(_ *tgtest.Server, req *tgtest.Request) error {
	id, _ := req.Buf.PeekID()
	name := methodName(id)
	s.lg.Error("Method not served by the fake", zap.String("method", name))
	obj, _ := decodeRequest(id, req.Buf)
	err := tgerr.New(400, "INPUT_METHOD_INVALID")
	s.mu.Lock()
	s.recordLocked(Event{Time: time.Now(), Kind: Unknown, Method: name, Request: obj, Err: err})
	s.mu.Unlock()
	return err
}

// handle registers a method whose request type is R.
func handle[R any, P interface {
	*R
	bin.Object
}](s *Server, id uint32, h func(srv *tgtest.Server, req *tgtest.Request, r P) error) {
	s.dc.HandleFunc(id, func(srv *tgtest.Server, req *tgtest.Request) error {
		r := P(new(R))
		if err := r.Decode(req.Buf); err != nil {
			return errors.Wrapf(err, "decode %s", methodName(id))
		}
		return h(srv, req, r)
	})
}

func (s *Server) register() {
	handle(s, tg.AuthImportBotAuthorizationRequestTypeID, s.importBotAuthorization)
	handle(s, tg.AuthLogOutRequestTypeID, func(srv *tgtest.Server, req *tgtest.Request, _ *tg.AuthLogOutRequest) error {
		s.mu.Lock()
		delete(s.authorized, req.Session.AuthKey.ID)
		s.call("auth.logOut", nil)
		s.mu.Unlock()
		return srv.SendResult(req, &tg.AuthLoggedOut{})
	})
	handle(s, tg.AuthExportAuthorizationRequestTypeID, s.exportAuthorization)
	handle(s, tg.AuthImportAuthorizationRequestTypeID, s.importAuthorization)
	handle(s, tg.UsersGetUsersRequestTypeID, s.getUsers)
	handle(s, tg.UpdatesGetStateRequestTypeID, s.getState)
	handle(s, tg.UpdatesGetDifferenceRequestTypeID, s.getDifference)
	handle(s, tg.UpdatesGetChannelDifferenceRequestTypeID, s.getChannelDifference)
	handle(s, tg.MessagesSendMessageRequestTypeID, s.sendMessage)
	handle(s, tg.MessagesEditMessageRequestTypeID, s.editMessage)
	handle(s, tg.MessagesDeleteMessagesRequestTypeID, s.deleteMessages)
	handle(s, tg.ChannelsDeleteMessagesRequestTypeID, s.channelsDeleteMessages)
	handle(s, tg.MessagesSendMediaRequestTypeID, s.sendMedia)
	handle(s, tg.MessagesSetTypingRequestTypeID, s.setTyping)
	handle(s, tg.MessagesSetBotCallbackAnswerRequestTypeID, s.setBotCallbackAnswer)
	handle(s, tg.BotsSetBotCommandsRequestTypeID, s.setBotCommands)
	handle(s, tg.MessagesSetBotGuestChatResultRequestTypeID, s.setBotGuestChatResult)
	handle(s, tg.MessagesEditInlineBotMessageRequestTypeID, s.editInlineBotMessage)
	handle(s, tg.MessagesUploadMediaRequestTypeID, s.uploadMedia)
	handle(s, tg.MessagesGetMessagesRequestTypeID, s.getMessages)
	handle(s, tg.ChannelsGetMessagesRequestTypeID, s.channelsGetMessages)
	handle(s, tg.UploadGetFileRequestTypeID, s.getFile)
	s.dc.HandleFunc(tg.UploadSaveFilePartRequestTypeID, s.savePart)
	s.dc.HandleFunc(tg.UploadSaveBigFilePartRequestTypeID, s.savePart)
}

// call records a method the fake serves without a dedicated Kind.
// s.mu must be held.
func (s *Server) call(method string, r bin.Object) {
	s.recordLocked(Event{Time: time.Now(), Kind: Call, Method: method, Request: r})
}

func (s *Server) importBotAuthorization(srv *tgtest.Server, req *tgtest.Request, r *tg.AuthImportBotAuthorizationRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ev := Event{Time: time.Now(), Kind: Call, Method: "auth.importBotAuthorization", Request: r}
	if r.BotAuthToken != s.opts.BotToken {
		ev.Err = tgerr.New(401, "ACCESS_TOKEN_INVALID")
		s.recordLocked(ev)
		return ev.Err
	}
	s.authorized[req.Session.AuthKey.ID] = true
	s.mainKey = req.Session.AuthKey.ID
	s.session, s.hasSession = req.Session, true
	s.connected = false
	s.recordLocked(ev)
	return srv.SendResult(req, &tg.AuthAuthorization{User: s.botUser()})
}

// exportAuthorization and importAuthorization serve gotd's auth transfer
// (telegram.Client.DC), which makes a second authorized connection.
func (s *Server) exportAuthorization(srv *tgtest.Server, req *tgtest.Request, r *tg.AuthExportAuthorizationRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.call("auth.exportAuthorization", r)
	if !s.authorized[req.Session.AuthKey.ID] {
		return tgerr.New(401, "AUTH_KEY_UNREGISTERED")
	}
	s.nextQueryID++
	token := []byte(fmt.Sprintf("export-%d", s.nextQueryID))
	s.exported[string(token)] = true
	return srv.SendResult(req, &tg.AuthExportedAuthorization{ID: s.opts.Bot.ID, Bytes: token})
}

func (s *Server) importAuthorization(srv *tgtest.Server, req *tgtest.Request, r *tg.AuthImportAuthorizationRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.call("auth.importAuthorization", r)
	if r.ID != s.opts.Bot.ID || !s.exported[string(r.Bytes)] {
		return tgerr.New(400, "AUTH_BYTES_INVALID")
	}
	delete(s.exported, string(r.Bytes))
	s.authorized[req.Session.AuthKey.ID] = true
	return srv.SendResult(req, &tg.AuthAuthorization{User: s.botUser()})
}

func (s *Server) getUsers(srv *tgtest.Server, req *tgtest.Request, r *tg.UsersGetUsersRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.call("users.getUsers", r)
	out := make([]bin.Encoder, 0, len(r.ID))
	for _, in := range r.ID {
		switch in := in.(type) {
		case *tg.InputUserSelf:
			out = append(out, s.botUser())
		case *tg.InputUser:
			if in.UserID == s.opts.Bot.ID {
				out = append(out, s.botUser())
				continue
			}
			if u, ok := s.users[in.UserID]; ok && u.AccessHash == in.AccessHash {
				out = append(out, u.tg())
				continue
			}
			out = append(out, &tg.UserEmpty{ID: in.UserID})
		default:
			out = append(out, &tg.UserEmpty{})
		}
	}
	return srv.SendVector(req, out...)
}

func (s *Server) stateLocked() tg.UpdatesState {
	return tg.UpdatesState{Pts: s.pts, Qts: s.qts, Date: int(time.Now().Unix())}
}

func (s *Server) getState(srv *tgtest.Server, req *tgtest.Request, r *tg.UpdatesGetStateRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.connected = true
	s.call("updates.getState", r)
	st := s.stateLocked()
	return srv.SendResult(req, &st)
}

func (s *Server) getDifference(srv *tgtest.Server, req *tgtest.Request, r *tg.UpdatesGetDifferenceRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.connected = true
	s.call("updates.getDifference", r)
	st := s.stateLocked()
	// A state ahead of ours is from another server (the fake restarted):
	// everything this one has is new to the bot, and the full difference
	// moves its state back to ours.
	reset := r.Pts > s.pts || r.Qts > s.qts
	if reset {
		r.Pts, r.Qts = 0, 0
	}
	var (
		msgs  []tg.MessageClass
		other []tg.UpdateClass
	)
	for _, e := range s.history {
		if e.pts <= r.Pts {
			continue
		}
		if u, ok := e.update.(*tg.UpdateNewMessage); ok {
			msgs = append(msgs, u.Message)
			continue
		}
		other = append(other, e.update)
	}
	for _, e := range s.qtsLog {
		if e.qts > r.Qts {
			other = append(other, e.update)
		}
	}
	if len(msgs) == 0 && len(other) == 0 && !reset {
		return srv.SendResult(req, &tg.UpdatesDifferenceEmpty{Date: st.Date})
	}
	if msgs == nil {
		msgs = []tg.MessageClass{}
	}
	if other == nil {
		other = []tg.UpdateClass{}
	}
	return srv.SendResult(req, &tg.UpdatesDifference{
		NewMessages:          msgs,
		NewEncryptedMessages: []tg.EncryptedMessageClass{},
		OtherUpdates:         other,
		Chats:                s.tgChatsLocked(),
		Users:                s.tgUsersLocked(),
		State:                st,
	})
}

func (s *Server) getChannelDifference(srv *tgtest.Server, req *tgtest.Request, r *tg.UpdatesGetChannelDifferenceRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.call("updates.getChannelDifference", r)
	chat, err := s.channelLocked(r.Channel)
	if err != nil {
		return err
	}
	if r.Pts >= chat.pts {
		return srv.SendResult(req, &tg.UpdatesChannelDifferenceEmpty{Final: true, Pts: chat.pts})
	}
	limit := r.Limit
	if limit <= 0 || limit > 100 {
		limit = 100
	}
	var (
		msgs  = []tg.MessageClass{}
		other = []tg.UpdateClass{}
		pts   = r.Pts
		final = true
	)
	for _, e := range chat.history {
		if e.pts <= r.Pts {
			continue
		}
		if len(msgs)+len(other) >= limit {
			final = false
			break
		}
		pts = e.pts
		if u, ok := e.update.(*tg.UpdateNewChannelMessage); ok {
			msgs = append(msgs, u.Message)
			continue
		}
		other = append(other, e.update)
	}
	return srv.SendResult(req, &tg.UpdatesChannelDifference{
		Final:        final,
		Pts:          pts,
		NewMessages:  msgs,
		OtherUpdates: other,
		Chats:        s.tgChatsLocked(),
		Users:        s.tgUsersLocked(),
	})
}

// describeLocked is the Event of a request served at now, with the fields
// that come from the request alone. s.mu must be held.
func (s *Server) describeLocked(obj bin.Object, now time.Time) Event {
	ev := Event{Time: now, Kind: Call, Request: obj}
	if t, ok := obj.(interface{ TypeID() uint32 }); ok {
		ev.Method = methodName(t.TypeID())
	}
	peer := func(p tg.InputPeerClass) {
		c, err := s.peerLocked(p)
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
			if m := s.commonMsgLocked(r.ID[0]); m != nil {
				ev.Chat = m.Chat
			}
		}
	case *tg.ChannelsDeleteMessagesRequest:
		ev.Kind = Delete
		ev.MsgIDs = r.ID
		ev.Chat, _ = s.channelLocked(r.Channel)
	case *tg.MessagesSetBotCallbackAnswerRequest:
		ev.Kind = Toast
		ev.QueryID, ev.Text, ev.Alert, ev.URL = r.QueryID, r.Message, r.Alert, r.URL
		if q, ok := s.callbacks[r.QueryID]; ok {
			ev.Chat, ev.MsgID = q.chat, q.msgID
		}
	case *tg.BotsSetBotCommandsRequest:
		ev.Kind = Commands
		ev.Commands, ev.Scope, ev.LangCode = r.Commands, r.Scope, r.LangCode
	case *tg.MessagesSetBotGuestChatResultRequest:
		ev.Kind = GuestResult
		ev.QueryID = r.QueryID
		if q, ok := s.queries[r.QueryID]; ok {
			ev.Chat = q.chat
		}
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
			if m, ok := s.inline[int64(id.ID)]; ok {
				ev.Chat = m.Chat
				ev.QueryID = m.GuestQuery
			}
		}
	}
	return ev
}

func utf16Len(s string) int { return len(utf16.Encode([]rune(s))) }

func (s *Server) sendMessage(srv *tgtest.Server, req *tgtest.Request, r *tg.MessagesSendMessageRequest) error {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	ev := s.describeLocked(r, now)
	switch {
	case ev.Err != nil:
	case strings.TrimSpace(r.Message) == "":
		ev.Err = tgerr.New(400, "MESSAGE_EMPTY")
	case utf16Len(r.Message) > maxMessageUnits:
		ev.Err = tgerr.New(400, "MESSAGE_TOO_LONG")
	}
	if ev.Err != nil {
		s.recordLocked(ev)
		return ev.Err
	}
	return s.sendLocked(srv, req, ev, &Message{
		Chat: ev.Chat, Out: true, Text: r.Message, Entities: r.Entities,
		ReplyTo: ev.ReplyTo, TopicID: ev.TopMsgID,
		Silent: r.Silent, NoWebpage: r.NoWebpage, Buttons: ev.Buttons, Date: now,
	}, r.RandomID)
}

// sendLocked adds m, a message the bot sends, records ev, the event of its
// request, and answers with the sent result.
func (s *Server) sendLocked(srv *tgtest.Server, req *tgtest.Request, ev Event, m *Message, randomID int64) error {
	s.setTopicLocked(m)
	upd := s.addMessageLocked(m)
	ev.MsgID = m.ID
	s.recordLocked(ev)
	return srv.SendResult(req, s.sentResultLocked(m, upd, randomID))
}

// sentResultLocked is the result of sending m: updateShortSentMessage in
// private chats and groups, Updates with the message in channels.
func (s *Server) sentResultLocked(m *Message, upd tg.UpdateClass, randomID int64) tg.UpdatesClass {
	if !m.Chat.Channel() && m.Media == nil {
		u := upd.(*tg.UpdateNewMessage)
		res := &tg.UpdateShortSentMessage{Out: true, ID: m.ID, Pts: u.Pts, PtsCount: u.PtsCount, Date: int(m.Date.Unix())}
		if len(m.Entities) > 0 {
			res.SetEntities(cloneEntities(m.Entities))
		}
		return res
	}
	return &tg.Updates{
		Updates: []tg.UpdateClass{&tg.UpdateMessageID{ID: m.ID, RandomID: randomID}, upd},
		Users:   s.tgUsersLocked(),
		Chats:   s.tgChatsLocked(),
		Date:    int(m.Date.Unix()),
	}
}

func (s *Server) editMessage(srv *tgtest.Server, req *tgtest.Request, r *tg.MessagesEditMessageRequest) error {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	ev := s.describeLocked(r, now)
	var m *Message
	if ev.Err == nil {
		m = ev.Chat.msgs[r.ID]
		_, hasText := r.GetMessage()
		text := m.textOr(r.Message, hasText)
		switch {
		case m == nil || m.Deleted:
			ev.Err = ErrMessageIDInvalid
		case !m.Out:
			ev.Err = tgerr.New(403, "MESSAGE_AUTHOR_REQUIRED")
		case hasText && strings.TrimSpace(text) == "" && m.Media == nil:
			ev.Err = tgerr.New(400, "MESSAGE_EMPTY")
		case utf16Len(text) > maxMessageUnits:
			ev.Err = tgerr.New(400, "MESSAGE_TOO_LONG")
		case text == m.Text && equalButtons(ev.Buttons, m.Buttons) && equalEntities(r.Entities, m.Entities) && r.Media == nil:
			ev.Err = ErrMessageNotModified
		}
	}
	if ev.Err != nil {
		s.recordLocked(ev)
		return ev.Err
	}
	if _, ok := r.GetMessage(); ok {
		m.Text, m.Entities = r.Message, r.Entities
	}
	m.Buttons = ev.Buttons
	m.NoWebpage = r.NoWebpage
	m.Edited = now
	m.Edits++
	upd := s.addUpdateLocked(m.Chat, func(pts int) tg.UpdateClass {
		if m.Chat.Channel() {
			return &tg.UpdateEditChannelMessage{Message: m.tg(), Pts: pts, PtsCount: 1}
		}
		return &tg.UpdateEditMessage{Message: m.tg(), Pts: pts, PtsCount: 1}
	})
	s.recordLocked(ev)
	return srv.SendResult(req, &tg.Updates{
		Updates: []tg.UpdateClass{upd},
		Users:   s.tgUsersLocked(),
		Chats:   s.tgChatsLocked(),
		Date:    int(now.Unix()),
	})
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

func (s *Server) deleteMessages(srv *tgtest.Server, req *tgtest.Request, r *tg.MessagesDeleteMessagesRequest) error {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	ev := s.describeLocked(r, now)
	ids := markDeleted(r.ID, s.commonMsgLocked)
	s.notifyLocked()
	s.recordLocked(ev)
	if len(ids) == 0 {
		return srv.SendResult(req, &tg.MessagesAffectedMessages{Pts: s.pts, PtsCount: 0})
	}
	s.pts += len(ids)
	s.history = append(s.history, ptsEntry{pts: s.pts, update: &tg.UpdateDeleteMessages{Messages: ids, Pts: s.pts, PtsCount: len(ids)}})
	return srv.SendResult(req, &tg.MessagesAffectedMessages{Pts: s.pts, PtsCount: len(ids)})
}

func (s *Server) channelsDeleteMessages(srv *tgtest.Server, req *tgtest.Request, r *tg.ChannelsDeleteMessagesRequest) error {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	ev := s.describeLocked(r, now)
	chat, err := s.channelLocked(r.Channel)
	if err != nil {
		ev.Err = err
		s.recordLocked(ev)
		return err
	}
	ids := markDeleted(r.ID, func(id int) *Message { return chat.msgs[id] })
	s.recordLocked(ev)
	if len(ids) == 0 {
		return srv.SendResult(req, &tg.MessagesAffectedMessages{Pts: chat.pts, PtsCount: 0})
	}
	chat.pts += len(ids)
	chat.history = append(chat.history, ptsEntry{pts: chat.pts, update: &tg.UpdateDeleteChannelMessages{ChannelID: chat.ID, Messages: ids, Pts: chat.pts, PtsCount: len(ids)}})
	return srv.SendResult(req, &tg.MessagesAffectedMessages{Pts: chat.pts, PtsCount: len(ids)})
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

func (s *Server) setTyping(srv *tgtest.Server, req *tgtest.Request, r *tg.MessagesSetTypingRequest) error {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	ev := s.describeLocked(r, now)
	if ev.Err == nil && ev.Kind == Draft && !s.draftsAllowedLocked(ev.Chat) {
		ev.Err = ErrDraftRefused
	}
	s.recordLocked(ev)
	if ev.Err != nil {
		return ev.Err
	}
	return srv.SendBool(req, true)
}

func (s *Server) draftsAllowedLocked(c *Chat) bool {
	if c.drafts != nil {
		return *c.drafts
	}
	return c.Kind == Private || s.opts.GroupDrafts
}

func (s *Server) setBotCallbackAnswer(srv *tgtest.Server, req *tgtest.Request, r *tg.MessagesSetBotCallbackAnswerRequest) error {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	ev := s.describeLocked(r, now)
	q, ok := s.callbacks[r.QueryID]
	switch {
	case !ok:
		ev.Err = tgerr.New(400, "QUERY_ID_INVALID")
	case q.answered:
		ev.Err = tgerr.New(400, "QUERY_ID_INVALID")
	default:
		q.answered = true
	}
	s.recordLocked(ev)
	if ev.Err != nil {
		return ev.Err
	}
	return srv.SendBool(req, true)
}

func (s *Server) setBotCommands(srv *tgtest.Server, req *tgtest.Request, r *tg.BotsSetBotCommandsRequest) error {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	ev := s.describeLocked(r, now)
	s.commands = append([]tg.BotCommand(nil), r.Commands...)
	s.recordLocked(ev)
	return srv.SendBool(req, true)
}

func (s *Server) setBotGuestChatResult(srv *tgtest.Server, req *tgtest.Request, r *tg.MessagesSetBotGuestChatResultRequest) error {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	ev := s.describeLocked(r, now)
	q, ok := s.queries[r.QueryID]
	switch {
	case !ok || q.answer != nil:
		ev.Err = tgerr.New(400, "QUERY_ID_INVALID")
	case strings.TrimSpace(ev.Text) == "":
		ev.Err = tgerr.New(400, "MESSAGE_EMPTY")
	}
	if ev.Err != nil {
		s.recordLocked(ev)
		return ev.Err
	}
	s.nextInline++
	id := &tg.InputBotInlineMessageID64{DCID: s.opts.DC, OwnerID: q.chat.ID, ID: s.nextInline, AccessHash: int64(s.nextInline) * 7919}
	m := &Message{
		ID: id.ID, Chat: q.chat, Out: true, Text: ev.Text, Entities: ev.Entities,
		NoWebpage: ev.NoWebpage, Buttons: ev.Buttons, Date: now, InlineID: id, GuestQuery: r.QueryID,
	}
	q.answer = m
	s.inline[int64(id.ID)] = m
	ev.InlineID = id
	s.recordLocked(ev)
	return srv.SendResult(req, id)
}

func (s *Server) editInlineBotMessage(srv *tgtest.Server, req *tgtest.Request, r *tg.MessagesEditInlineBotMessageRequest) error {
	now := time.Now()
	md, ferr := s.inlineMedia(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	ev := s.describeLocked(r, now)
	ev.Media = md
	var m *Message
	if ev.InlineID != nil {
		m = s.inline[int64(ev.InlineID.ID)]
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
		s.recordLocked(ev)
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
	s.recordLocked(ev)
	return srv.SendBool(req, true)
}

func (s *Server) getMessages(srv *tgtest.Server, req *tgtest.Request, r *tg.MessagesGetMessagesRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.call("messages.getMessages", r)
	msgs := s.inputMessagesLocked(r.ID, s.commonMsgLocked)
	return srv.SendResult(req, &tg.MessagesMessages{
		Messages: msgs, Topics: []tg.ForumTopicClass{},
		Chats: s.tgChatsLocked(), Users: s.tgUsersLocked(),
	})
}

func (s *Server) channelsGetMessages(srv *tgtest.Server, req *tgtest.Request, r *tg.ChannelsGetMessagesRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.call("channels.getMessages", r)
	chat, err := s.channelLocked(r.Channel)
	if err != nil {
		return err
	}
	msgs := s.inputMessagesLocked(r.ID, func(id int) *Message { return chat.msgs[id] })
	return srv.SendResult(req, &tg.MessagesChannelMessages{
		Pts: chat.pts, Count: len(msgs),
		Messages: msgs, Topics: []tg.ForumTopicClass{},
		Chats: s.tgChatsLocked(), Users: s.tgUsersLocked(),
	})
}

func (s *Server) inputMessagesLocked(ids []tg.InputMessageClass, get func(int) *Message) []tg.MessageClass {
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
