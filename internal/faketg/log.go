package faketg

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/gotd/td/bin"
	"github.com/gotd/td/tg"
	"github.com/gotd/td/tgerr"
)

// Kind says what an Event is.
type Kind string

// Event kinds.
const (
	// Send is messages.sendMessage.
	Send Kind = "send"
	// Edit is messages.editMessage.
	Edit Kind = "edit"
	// Draft is messages.setTyping with sendMessageTextDraftAction.
	Draft Kind = "draft"
	// Typing is messages.setTyping with any other action.
	Typing Kind = "typing"
	// Delete is messages.deleteMessages or channels.deleteMessages.
	Delete Kind = "delete"
	// Upload is messages.sendMedia (Event.Media holds the file).
	Upload Kind = "upload"
	// Toast is messages.setBotCallbackAnswer.
	Toast Kind = "toast"
	// Commands is bots.setBotCommands.
	Commands Kind = "commands"
	// GuestResult is messages.setBotGuestChatResult.
	GuestResult Kind = "guest_result"
	// InlineEdit is messages.editInlineBotMessage.
	InlineEdit Kind = "inline_edit"
	// Call is any other method the fake serves (updates.getDifference,
	// users.getUsers, upload.getFile, …).
	Call Kind = "call"
	// Unknown is a method the fake does not serve. The bot got
	// 400 INPUT_METHOD_INVALID; tests should treat it as a failure.
	Unknown Kind = "unknown"
)

// Event is one RPC call of the bot, as the server received it. Fields that
// do not apply to the Kind are zero.
type Event struct {
	// Seq is the event's 1-based position in the log.
	Seq int
	// Time is when the server received the call.
	Time   time.Time
	Kind   Kind
	Method string // TL name, e.g. "messages.editMessage"

	// Chat the call addressed, if any.
	Chat *Chat
	// MsgID is the message sent (Send, Upload), edited (Edit) or pressed
	// (Toast).
	MsgID int
	// MsgIDs are the deleted messages (Delete).
	MsgIDs []int
	// Text of a message, draft, caption, toast or guest answer.
	Text     string
	Entities []tg.MessageEntityClass
	// ReplyTo is reply_to.reply_to_msg_id; TopMsgID its top_msg_id, or the
	// top_msg_id of a draft.
	ReplyTo   int
	TopMsgID  int
	Silent    bool
	NoWebpage bool
	// HasMarkup is true when the call carried reply_markup; Buttons is then
	// its inline keyboard (nil for another kind of markup or none).
	HasMarkup bool
	Buttons   [][]Button
	// Draft is set for Draft events; Typing events keep the action in
	// Action.
	Draft  *DraftInfo
	Action tg.SendMessageActionClass
	// Media is the uploaded file of an Upload, of an InlineEdit that sets
	// media, or of a messages.uploadMedia Call.
	Media *Media
	// QueryID of a Toast or GuestResult; Alert and URL of a Toast.
	QueryID int64
	Alert   bool
	URL     string
	// Commands of a Commands event, with its scope and language.
	Commands []tg.BotCommand
	Scope    tg.BotCommandScopeClass
	LangCode string
	// InlineID of a GuestResult (the ID the fake returned) or InlineEdit.
	InlineID *tg.InputBotInlineMessageID64

	// Err is the RPC error the fake answered with (an injected fault, or
	// Telegram's own refusal such as MESSAGE_NOT_MODIFIED); nil on success.
	Err *tgerr.Error
	// Request is the decoded request.
	Request bin.Object
}

// DraftInfo is a text draft (sendMessageTextDraftAction).
type DraftInfo struct {
	RandomID   int64
	CanStop    bool
	KeepOnStop bool
	// TopMsgID is the topic of the draft (0 for none).
	TopMsgID int
	Chat     *Chat
}

// OK reports whether the call succeeded.
func (e Event) OK() bool { return e.Err == nil }

func (e Event) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d %s %s", e.Seq, e.Time.Format("15:04:05.000"), e.Method)
	if e.Chat != nil {
		fmt.Fprintf(&b, " chat=%s", e.Chat)
	}
	if e.MsgID != 0 {
		fmt.Fprintf(&b, " id=%d", e.MsgID)
	}
	if len(e.MsgIDs) > 0 {
		fmt.Fprintf(&b, " ids=%v", e.MsgIDs)
	}
	if e.ReplyTo != 0 {
		fmt.Fprintf(&b, " reply_to=%d", e.ReplyTo)
	}
	if e.TopMsgID != 0 {
		fmt.Fprintf(&b, " top=%d", e.TopMsgID)
	}
	if e.Draft != nil {
		fmt.Fprintf(&b, " random_id=%d can_stop=%v", e.Draft.RandomID, e.Draft.CanStop)
	}
	if e.Media != nil {
		kind := "document"
		if e.Media.Photo {
			kind = "photo"
		}
		fmt.Fprintf(&b, " %s=%q mime=%q bytes=%d", kind, e.Media.Filename, e.Media.MIME, len(e.Media.Data))
	}
	if e.Silent {
		b.WriteString(" silent")
	}
	if e.NoWebpage {
		b.WriteString(" no_webpage")
	}
	if e.HasMarkup {
		fmt.Fprintf(&b, " buttons=%v", e.Buttons)
	}
	if e.Text != "" {
		t := e.Text
		if len(t) > 80 {
			t = t[:77] + "..."
		}
		fmt.Fprintf(&b, " text=%q", t)
	}
	if e.Err != nil {
		fmt.Fprintf(&b, " -> %s", e.Err)
	}
	return b.String()
}

// Log is the bot's calls in the order the server received them. A Log
// from the Server is a snapshot: later calls do not change it.
type Log []Event

// Of returns the events of the given kinds.
func (l Log) Of(kinds ...Kind) Log {
	return l.Filter(func(e Event) bool {
		for _, k := range kinds {
			if e.Kind == k {
				return true
			}
		}
		return false
	})
}

// In returns the events addressed to chat.
func (l Log) In(chat *Chat) Log {
	return l.Filter(func(e Event) bool { return e.Chat == chat })
}

// OK returns the calls that succeeded.
func (l Log) OK() Log { return l.Filter(Event.OK) }

// Method returns the calls of a method, by TL name ("messages.getHistory").
func (l Log) Method(name string) Log {
	return l.Filter(func(e Event) bool { return e.Method == name })
}

// After returns the events after the one with sequence number seq.
func (l Log) After(seq int) Log {
	if seq <= 0 {
		return l
	}
	if seq >= len(l) {
		return nil
	}
	return l[seq:]
}

// Filter returns the events for which keep is true.
func (l Log) Filter(keep func(Event) bool) Log {
	var out Log
	for _, e := range l {
		if keep(e) {
			out = append(out, e)
		}
	}
	return out
}

// Find returns the first event for which match is true.
func (l Log) Find(match func(Event) bool) (Event, bool) {
	for _, e := range l {
		if match(e) {
			return e, true
		}
	}
	return Event{}, false
}

// Last returns the last event, if any.
func (l Log) Last() (Event, bool) {
	if len(l) == 0 {
		return Event{}, false
	}
	return l[len(l)-1], true
}

// Texts returns the Text of every event.
func (l Log) Texts() []string {
	out := make([]string, len(l))
	for i, e := range l {
		out[i] = e.Text
	}
	return out
}

func (l Log) String() string {
	var b strings.Builder
	for _, e := range l {
		b.WriteString(e.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// journal is the log of the bot's calls, and the wake-up of those who
// wait on it or on the fake's state. Its lock is the innermost of the
// fake's: the services record and notify while holding theirs.
type journal struct {
	mu      sync.Mutex
	log     Log
	changed chan struct{}
}

func newJournal() *journal { return &journal{changed: make(chan struct{})} }

// record appends e to the log and wakes the waiters.
func (j *journal) record(e Event) Event {
	j.mu.Lock()
	defer j.mu.Unlock()
	e.Seq = len(j.log) + 1
	j.log = append(j.log, e)
	j.notifyLocked()
	return e
}

// call records a method the fake serves without a dedicated Kind.
func (j *journal) call(method string, r bin.Object) {
	j.record(Event{Time: time.Now(), Kind: Call, Method: method, Request: r})
}

// notify wakes the waiters: the fake's state changed.
func (j *journal) notify() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.notifyLocked()
}

func (j *journal) notifyLocked() {
	close(j.changed)
	j.changed = make(chan struct{})
}

// snapshot is the log so far, and a channel closed at its next change.
func (j *journal) snapshot() (Log, <-chan struct{}) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.log[:len(j.log):len(j.log)], j.changed
}

// Log returns a snapshot of every call the bot made so far.
func (s *Server) Log() Log {
	l, _ := s.journal.snapshot()
	return l
}

// Seq is the sequence number of the last event so far (0 for none). Pass
// it to Log.After or WaitEvent to look only at later calls.
func (s *Server) Seq() int { return len(s.Log()) }

// WaitFor waits until done returns true for the log (and returns that
// log), or ctx ends. done is called once at once and after every change
// of the log or of the fake's state (messages), never concurrently, and
// must not call back into the Server. On ctx's end the error wraps
// ctx.Err() and carries the log's tail, for the test's message.
func (s *Server) WaitFor(ctx context.Context, done func(Log) bool) (Log, error) {
	for {
		l, ch := s.journal.snapshot()
		if done(l) {
			return l, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			tail := l
			if len(tail) > 20 {
				tail = tail[len(tail)-20:]
			}
			return l, fmt.Errorf("faketg: wait: %w; last calls:\n%s", ctx.Err(), tail)
		}
	}
}

// WaitEvent waits for the first event after sequence number since for
// which match is true.
func (s *Server) WaitEvent(ctx context.Context, since int, match func(Event) bool) (Event, error) {
	var found Event
	_, err := s.WaitFor(ctx, func(l Log) bool {
		e, ok := l.After(since).Find(match)
		found = e
		return ok
	})
	return found, err
}

// WaitKind waits for the first event of kind in chat (any chat if nil)
// after sequence number since.
func (s *Server) WaitKind(ctx context.Context, since int, kind Kind, chat *Chat) (Event, error) {
	return s.WaitEvent(ctx, since, func(e Event) bool {
		return e.Kind == kind && (chat == nil || e.Chat == chat)
	})
}
