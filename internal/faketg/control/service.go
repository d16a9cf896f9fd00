package control

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"shelljob.dev/shelljob/internal/faketg"
)

// API is the control API: Service serves it in process, Client over HTTP.
type API interface {
	Info(ctx context.Context) (Info, error)
	// WaitConnected waits until the bot is connected and gets updates.
	WaitConnected(ctx context.Context) error
	Send(ctx context.Context, r SendRequest) (Message, error)
	Press(ctx context.Context, r PressRequest) (Answer, error)
	StopDraft(ctx context.Context, r StopDraftRequest) (Draft, error)
	Delete(ctx context.Context, r DeleteRequest) error
	Guest(ctx context.Context, r GuestRequest) (GuestQuery, error)
	// GuestAnswer is the bot's answer to a guest query, edits applied.
	GuestAnswer(ctx context.Context, queryID int64) (Message, error)
	Fail(ctx context.Context, r FaultRequest) error
	ClearFaults(ctx context.Context) error
	Messages(ctx context.Context, chat int64) (Messages, error)
	Events(ctx context.Context, q EventsQuery) (Events, error)
	// File is the content of a file (Media.ID).
	File(ctx context.Context, id int64) ([]byte, error)
	NewUser(ctx context.Context, r UserRequest) (User, error)
	NewTopic(ctx context.Context, chat int64, r TopicRequest) (Topic, error)
}

var (
	_ API = (*Service)(nil)
	_ API = (*Client)(nil)
)

// Error is a failed request: an HTTP status and a message.
type Error struct {
	Status  int    `json:"-"`
	Message string `json:"error"`
}

func (e *Error) Error() string {
	return fmt.Sprintf("faketg control: %d %s: %s", e.Status, http.StatusText(e.Status), e.Message)
}

func errorf(status int, format string, args ...any) *Error {
	return &Error{Status: status, Message: fmt.Sprintf(format, args...)}
}

// IsNotFound reports whether err is a 404: an unknown user, chat,
// message, query or file.
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == http.StatusNotFound
}

// DefaultPressTimeout bounds the wait for a toast when neither the
// request nor its context does.
const DefaultPressTimeout = 15 * time.Second

// Service is the control API over a fake in the same process.
type Service struct {
	s        *faketg.Server
	instance string
	started  time.Time
}

// NewService serves the control API of s.
func NewService(s *faketg.Server) *Service {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return &Service{s: s, instance: hex.EncodeToString(b), started: time.Now()}
}

// Server is the fake the service controls.
func (v *Service) Server() *faketg.Server { return v.s }

// Info implements API.
func (v *Service) Info(context.Context) (Info, error) {
	s := v.s
	info := Info{
		Instance:  v.instance,
		Started:   v.started,
		DC:        s.DC(),
		DCAddr:    s.Addr(),
		Bot:       Bot{ID: s.BotID(), Username: s.BotUsername()},
		Connected: s.Connected(),
		Seq:       s.Seq(),
	}
	for _, u := range s.Users() {
		info.Users = append(info.Users, user(u))
	}
	for _, c := range s.Chats() {
		info.Chats = append(info.Chats, chat(c))
	}
	return info, nil
}

// WaitConnected implements API.
func (v *Service) WaitConnected(ctx context.Context) error { return v.s.WaitConnected(ctx) }

func (v *Service) user(id int64) (*faketg.User, error) {
	if id == 0 {
		ids := v.s.Admins()
		if len(ids) == 0 {
			return nil, errorf(http.StatusBadRequest, "no user given and no admin")
		}
		id = ids[0]
	}
	u, ok := v.s.User(id)
	if !ok {
		return nil, errorf(http.StatusNotFound, "no user %d", id)
	}
	return u, nil
}

func (v *Service) chat(id int64, u *faketg.User) (*faketg.Chat, error) {
	if id == 0 && u != nil {
		return u.Private(), nil
	}
	c, ok := v.s.Chat(id)
	if !ok {
		return nil, errorf(http.StatusNotFound, "no chat %d", id)
	}
	return c, nil
}

// Send implements API.
func (v *Service) Send(ctx context.Context, r SendRequest) (Message, error) {
	u, err := v.user(r.User)
	if err != nil {
		return Message{}, err
	}
	c, err := v.chat(r.Chat, u)
	if err != nil {
		return Message{}, err
	}
	b := u.In(c).Reply(r.ReplyTo).Topic(r.Topic)
	if r.Forwarded || r.ForwardedFrom != 0 {
		var from *faketg.User
		if r.ForwardedFrom != 0 {
			if from, err = v.user(r.ForwardedFrom); err != nil {
				return Message{}, err
			}
		}
		b = b.Forwarded(from)
	}
	switch {
	case r.Document != nil && r.Photo != nil:
		return Message{}, errorf(http.StatusBadRequest, "a document or a photo, not both")
	case r.Document != nil && r.Document.Size > 0 && r.Document.Data == nil:
		b = b.DocumentOfSize(r.Document.Name, r.Document.MIME, int(r.Document.Size))
	case r.Document != nil:
		b = b.Document(r.Document.Name, r.Document.MIME, r.Document.Data)
	case r.Photo != nil:
		b = b.Photo(r.Photo)
	}
	m, err := b.Text(ctx, r.Text)
	if err != nil {
		if m.ID == 0 {
			return Message{}, errorf(http.StatusBadRequest, "%v", err)
		}
		return Message{}, err
	}
	return message(m), nil
}

// Press implements API.
func (v *Service) Press(ctx context.Context, r PressRequest) (Answer, error) {
	u, err := v.user(r.User)
	if err != nil {
		return Answer{}, err
	}
	c, err := v.chat(r.Chat, u)
	if err != nil {
		return Answer{}, err
	}
	var data string
	if r.Data != nil {
		data = *r.Data
	} else {
		m, ok := c.Message(r.MsgID)
		if !ok {
			return Answer{}, errorf(http.StatusNotFound, "no message %d in %s", r.MsgID, c)
		}
		b, ok := firstCallback(m.Buttons)
		if !ok {
			return Answer{}, errorf(http.StatusBadRequest, "message %d has no callback button", r.MsgID)
		}
		data = string(b.Data)
	}
	if r.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(r.Timeout))
		defer cancel()
	} else if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultPressTimeout)
		defer cancel()
	}
	a, err := u.PressWith(ctx, c, r.MsgID, []byte(data), faketg.PressOptions{NoWait: r.NoWait})
	if err != nil {
		if ctx.Err() != nil {
			return Answer{}, errorf(http.StatusGatewayTimeout, "no answer from the bot to %q: %v", data, err)
		}
		return Answer{}, err
	}
	return Answer{QueryID: a.QueryID, Data: data, Text: a.Text, Alert: a.Alert, URL: a.URL, Seq: a.Event.Seq}, nil
}

func firstCallback(rows [][]faketg.Button) (faketg.Button, bool) {
	for _, row := range rows {
		for _, b := range row {
			if b.Type == "callback" {
				return b, true
			}
		}
	}
	return faketg.Button{}, false
}

// StopDraft implements API.
func (v *Service) StopDraft(ctx context.Context, r StopDraftRequest) (Draft, error) {
	u, err := v.user(r.User)
	if err != nil {
		return Draft{}, err
	}
	d := faketg.DraftInfo{RandomID: r.RandomID, TopMsgID: r.TopMsgID, Chat: u.Private()}
	if d.RandomID == 0 {
		e, ok := v.s.Log().Of(faketg.Draft).In(u.Private()).OK().Last()
		if !ok {
			return Draft{}, errorf(http.StatusNotFound, "no draft in the private chat of %s", u)
		}
		d = *e.Draft
	}
	if err := u.StopDraft(ctx, d); err != nil {
		return Draft{}, err
	}
	return draft(&d), nil
}

// Delete implements API.
func (v *Service) Delete(_ context.Context, r DeleteRequest) error {
	c, err := v.chat(r.Chat, nil)
	if err != nil {
		return err
	}
	if !c.Delete(r.ID) {
		return errorf(http.StatusNotFound, "no message %d in %s", r.ID, c)
	}
	return nil
}

// Guest implements API.
func (v *Service) Guest(ctx context.Context, r GuestRequest) (GuestQuery, error) {
	u, err := v.user(r.User)
	if err != nil {
		return GuestQuery{}, err
	}
	var c *faketg.Chat
	if r.Chat != 0 {
		if c, err = v.chat(r.Chat, nil); err != nil {
			return GuestQuery{}, err
		}
	} else {
		chats := v.s.Chats()
		i := slices.IndexFunc(chats, func(c *faketg.Chat) bool { return !c.BotMember })
		if i < 0 {
			return GuestQuery{}, errorf(http.StatusBadRequest, "no chat without the bot")
		}
		c = chats[i]
	}
	var refs []faketg.Message
	if r.ReplyTo != 0 {
		m, ok := c.Message(r.ReplyTo)
		if !ok {
			return GuestQuery{}, errorf(http.StatusNotFound, "no message %d in %s", r.ReplyTo, c)
		}
		refs = append(refs, m)
	}
	q, err := u.Guest(ctx, c, r.Text, refs...)
	if err != nil {
		if q == nil {
			return GuestQuery{}, errorf(http.StatusBadRequest, "%v", err)
		}
		return GuestQuery{}, err
	}
	return GuestQuery{QueryID: q.ID, Message: message(q.Message)}, nil
}

// GuestAnswer implements API.
func (v *Service) GuestAnswer(_ context.Context, queryID int64) (Message, error) {
	m, ok := v.s.GuestAnswer(queryID)
	if !ok {
		return Message{}, errorf(http.StatusNotFound, "no answer to guest query %d", queryID)
	}
	return message(m), nil
}

// Fail implements API.
func (v *Service) Fail(_ context.Context, r FaultRequest) error {
	id, ok := faketg.MethodID(r.Method)
	if !ok {
		return errorf(http.StatusBadRequest, "unknown method %q", r.Method)
	}
	if r.Error == "" {
		return errorf(http.StatusBadRequest, "no error type")
	}
	v.s.FailNext(id, r.N, faketg.RPCError(r.Error))
	return nil
}

// ClearFaults implements API.
func (v *Service) ClearFaults(context.Context) error {
	v.s.ClearFaults()
	return nil
}

// Messages implements API.
func (v *Service) Messages(_ context.Context, chatID int64) (Messages, error) {
	c, err := v.chat(chatID, nil)
	if err != nil {
		return Messages{}, err
	}
	out := Messages{Seq: v.s.Seq(), Messages: []Message{}}
	for _, m := range c.Messages() {
		out.Messages = append(out.Messages, message(m))
	}
	return out, nil
}

// Events implements API.
func (v *Service) Events(ctx context.Context, q EventsQuery) (Events, error) {
	keep := func(e faketg.Event) bool {
		if q.Chat != 0 && (e.Chat == nil || e.Chat.BotAPIID() != q.Chat) {
			return false
		}
		return len(q.Kinds) == 0 || slices.Contains(q.Kinds, string(e.Kind))
	}
	var l faketg.Log
	if q.Wait > 0 {
		wctx, cancel := context.WithTimeout(ctx, q.Wait)
		defer cancel()
		var err error
		l, err = v.s.WaitFor(wctx, func(l faketg.Log) bool { return slices.ContainsFunc(l.After(q.After), keep) })
		if err != nil && ctx.Err() != nil {
			return Events{}, ctx.Err()
		}
	} else {
		l = v.s.Log()
	}
	out := Events{Events: []Event{}, Last: len(l)}
	for _, e := range l.After(q.After).Filter(keep) {
		out.Events = append(out.Events, event(e))
	}
	return out, nil
}

// File implements API.
func (v *Service) File(_ context.Context, id int64) ([]byte, error) {
	md, err := v.file(id)
	return md.Data, err
}

func (v *Service) file(id int64) (faketg.Media, error) {
	md, ok := v.s.File(id)
	switch {
	case !ok:
		return faketg.Media{}, errorf(http.StatusNotFound, "no file %d", id)
	case md.Data == nil && md.Size > 0:
		return faketg.Media{}, errorf(http.StatusGone, "file %d (%d bytes) is no longer kept: the fake keeps the newest %d MiB of files (faketg.Options.FileBytes)",
			id, md.Size, v.s.FileBytes()>>20)
	}
	return md, nil
}

// NewUser implements API.
func (v *Service) NewUser(_ context.Context, r UserRequest) (User, error) {
	if r.ID != 0 {
		if _, ok := v.s.User(r.ID); ok || r.ID == v.s.BotID() {
			return User{}, errorf(http.StatusConflict, "user ID %d taken", r.ID)
		}
	}
	u := v.s.NewUser(faketg.UserOptions{ID: r.ID, Username: r.Username, FirstName: r.FirstName, Admin: r.Admin})
	return user(u), nil
}

// NewTopic implements API.
func (v *Service) NewTopic(ctx context.Context, chatID int64, r TopicRequest) (Topic, error) {
	c, err := v.chat(chatID, nil)
	if err != nil {
		return Topic{}, err
	}
	if c.Kind != faketg.Forum {
		return Topic{}, errorf(http.StatusBadRequest, "%s is not a forum", c)
	}
	t, err := c.NewTopic(ctx, r.Title)
	if err != nil {
		return Topic{}, err
	}
	return Topic{ID: t.ID, Title: t.Title}, nil
}

// The one conversion from faketg's types to the wire's.

func user(u *faketg.User) User {
	return User{
		ID: u.ID, Username: u.Username, FirstName: u.FirstName, Admin: u.Admin,
		PrivateChat: u.Private().BotAPIID(), Name: u.String(),
	}
}

func chat(c *faketg.Chat) Chat {
	out := Chat{ID: c.BotAPIID(), Kind: c.Kind.String(), Title: c.Title, BotMember: c.BotMember, Name: c.String()}
	if c.User != nil {
		out.User = c.User.ID
	}
	if c.Kind == faketg.Forum {
		for _, t := range c.Topics() {
			out.Topics = append(out.Topics, Topic{ID: t.ID, Title: t.Title})
		}
	}
	return out
}

func chatID(c *faketg.Chat) int64 {
	if c == nil {
		return 0
	}
	return c.BotAPIID()
}

func message(m faketg.Message) Message {
	out := Message{
		Chat: chatID(m.Chat), ID: m.ID, Out: m.Out, Date: m.Date, Edits: m.Edits,
		Text: m.Text, ReplyTo: m.ReplyTo, Topic: m.TopicID, Forwarded: m.Forwarded,
		Buttons: buttons(m.Buttons), Media: media(m.Media), Deleted: m.Deleted, GuestQuery: m.GuestQuery,
	}
	if m.From != nil {
		out.From = m.From.ID
	}
	if !m.Edited.IsZero() {
		t := m.Edited
		out.EditDate = &t
	}
	return out
}

func buttons(rows [][]faketg.Button) [][]Button {
	if len(rows) == 0 {
		return nil
	}
	out := make([][]Button, 0, len(rows))
	for _, row := range rows {
		r := make([]Button, 0, len(row))
		for _, b := range row {
			r = append(r, Button{Text: b.Text, Type: b.Type, Data: string(b.Data), URL: b.URL})
		}
		out = append(out, r)
	}
	return out
}

// FilePath is the path of a file's content in the control API.
func FilePath(id int64) string { return "/v1/files/" + strconv.FormatInt(id, 10) }

func media(md *faketg.Media) *Media {
	if md == nil {
		return nil
	}
	return &Media{
		ID: md.ID(), Photo: md.Photo, Name: md.Filename, MIME: md.MIME,
		Size: md.Size, URL: FilePath(md.ID()),
	}
}

func draft(d *faketg.DraftInfo) Draft {
	return Draft{Chat: chatID(d.Chat), RandomID: d.RandomID, CanStop: d.CanStop, KeepOnStop: d.KeepOnStop, TopMsgID: d.TopMsgID}
}

func event(e faketg.Event) Event {
	out := Event{
		Seq: e.Seq, Time: e.Time, Kind: string(e.Kind), Method: e.Method,
		Chat: chatID(e.Chat), MsgID: e.MsgID, MsgIDs: e.MsgIDs, Text: e.Text,
		ReplyTo: e.ReplyTo, TopMsgID: e.TopMsgID, Silent: e.Silent, NoWebpage: e.NoWebpage,
		HasMarkup: e.HasMarkup, Buttons: buttons(e.Buttons), Media: media(e.Media),
		QueryID: e.QueryID, Alert: e.Alert, URL: e.URL, Summary: e.String(),
	}
	if e.Draft != nil {
		d := draft(e.Draft)
		out.Draft = &d
	}
	if e.Action != nil {
		out.Action = e.Action.TypeName()
	}
	for _, c := range e.Commands {
		out.Commands = append(out.Commands, Command{Command: c.Command, Description: c.Description})
	}
	if e.Err != nil {
		out.Error = &RPCError{Code: e.Err.Code, Type: e.Err.Type, Argument: e.Err.Argument, Message: e.Err.Error()}
	}
	return out
}
