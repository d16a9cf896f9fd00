package control

import (
	"encoding/json"
	"fmt"
	"time"
)

// Info describes the fake: its bot, users and chats.
type Info struct {
	// Instance is random per process of the fake: a new value means the
	// fake restarted and lost its state (users and chats are made anew,
	// message IDs and event sequence numbers start over).
	Instance string    `json:"instance"`
	Started  time.Time `json:"started"`
	DC       int       `json:"dc"`
	// DCAddr is the address the fake advertises in help.getConfig.
	DCAddr string `json:"dc_addr"`
	Bot    Bot    `json:"bot"`
	// Connected reports whether the bot has a connection that updates
	// are pushed to.
	Connected bool `json:"connected"`
	// Seq is the sequence number of the bot's last call so far.
	Seq   int    `json:"seq"`
	Users []User `json:"users"`
	Chats []Chat `json:"chats"`
}

// Bot is the bot's account.
type Bot struct {
	ID       int64  `json:"id"`
	Username string `json:"username"`
}

// User is a user of the fake.
type User struct {
	ID        int64  `json:"id"`
	Username  string `json:"username,omitempty"`
	FirstName string `json:"first_name"`
	Admin     bool   `json:"admin"`
	// PrivateChat is the ID of the user's private chat with the bot.
	PrivateChat int64 `json:"private_chat"`
	// Name is how the fake prints the user: "@alice(1000001)".
	Name string `json:"name"`
}

// Chat is a chat of the fake.
type Chat struct {
	// ID is the chat's Bot API ID: the user's ID for a private chat,
	// -ID for a basic group, -100…ID for a supergroup or forum. Requests
	// name chats by it.
	ID int64 `json:"id"`
	// Kind is "private", "group", "supergroup" or "forum".
	Kind  string `json:"kind"`
	Title string `json:"title,omitempty"`
	// User is the other side of a private chat.
	User int64 `json:"user,omitempty"`
	// BotMember is false for a chat the bot is not in (guest queries).
	BotMember bool    `json:"bot_member"`
	Topics    []Topic `json:"topics,omitempty"`
	// Name is how the fake prints the chat: `group:"ops"(2000001)`.
	Name string `json:"name"`
}

// Topic is a forum topic.
type Topic struct {
	ID    int    `json:"id"`
	Title string `json:"title"`
}

// Button is an inline keyboard button.
type Button struct {
	Text string `json:"text"`
	// Type is "callback", "url", "copy", "switch_inline" or another
	// button type's name.
	Type string `json:"type"`
	Data string `json:"data,omitempty"`
	URL  string `json:"url,omitempty"`
}

// Media is a file in a message or in a call of the bot. Its bytes are at
// URL (GET /v1/files/ID).
type Media struct {
	ID    int64  `json:"id"`
	Photo bool   `json:"photo,omitempty"`
	Name  string `json:"name,omitempty"`
	MIME  string `json:"mime,omitempty"`
	Size  int    `json:"size"`
	URL   string `json:"url"`
}

// Message is a message in its current state: edits applied.
type Message struct {
	Chat int64 `json:"chat"`
	ID   int   `json:"id"`
	// From is the sender's user ID; 0 for the bot's messages (Out).
	From      int64      `json:"from,omitempty"`
	Out       bool       `json:"out"`
	Date      time.Time  `json:"date"`
	EditDate  *time.Time `json:"edit_date,omitempty"`
	Edits     int        `json:"edits,omitempty"`
	Text      string     `json:"text"`
	ReplyTo   int        `json:"reply_to,omitempty"`
	Topic     int        `json:"topic,omitempty"`
	Forwarded bool       `json:"forwarded,omitempty"`
	Buttons   [][]Button `json:"buttons,omitempty"`
	Media     *Media     `json:"media,omitempty"`
	Deleted   bool       `json:"deleted,omitempty"`
	// GuestQuery is the query a guest answer belongs to.
	GuestQuery int64 `json:"guest_query,omitempty"`
}

// Messages is a chat's messages in ID order, deleted ones included.
type Messages struct {
	// Seq is the event sequence number when the list was read: an event
	// after it may have changed the chat since.
	Seq      int       `json:"seq"`
	Messages []Message `json:"messages"`
}

// Event is one call of the bot (faketg.Event). Fields that do not apply
// to the Kind are left out.
type Event struct {
	Seq  int       `json:"seq"`
	Time time.Time `json:"time"`
	// Kind is send, edit, draft, typing, delete, upload, toast, commands,
	// guest_result, inline_edit, call or unknown (faketg.Kind).
	Kind   string `json:"kind"`
	Method string `json:"method"`
	// Chat is the Bot API ID of the chat the call addressed.
	Chat      int64      `json:"chat,omitempty"`
	MsgID     int        `json:"msg_id,omitempty"`
	MsgIDs    []int      `json:"msg_ids,omitempty"`
	Text      string     `json:"text,omitempty"`
	ReplyTo   int        `json:"reply_to,omitempty"`
	TopMsgID  int        `json:"top_msg_id,omitempty"`
	Silent    bool       `json:"silent,omitempty"`
	NoWebpage bool       `json:"no_webpage,omitempty"`
	HasMarkup bool       `json:"has_markup,omitempty"`
	Buttons   [][]Button `json:"buttons,omitempty"`
	Draft     *Draft     `json:"draft,omitempty"`
	// Action is the TL name of a typing action (Typing events).
	Action   string    `json:"action,omitempty"`
	Media    *Media    `json:"media,omitempty"`
	QueryID  int64     `json:"query_id,omitempty"`
	Alert    bool      `json:"alert,omitempty"`
	URL      string    `json:"url,omitempty"`
	Commands []Command `json:"commands,omitempty"`
	// Error is the RPC error the fake answered with.
	Error *RPCError `json:"error,omitempty"`
	// Summary is the event as the fake prints it (faketg.Event.String).
	Summary string `json:"summary"`
}

// OK reports whether the call succeeded.
func (e Event) OK() bool { return e.Error == nil }

// Draft is a text draft (sendMessageTextDraftAction).
type Draft struct {
	Chat       int64 `json:"chat"`
	RandomID   int64 `json:"random_id"`
	CanStop    bool  `json:"can_stop"`
	KeepOnStop bool  `json:"keep_on_stop,omitempty"`
	TopMsgID   int   `json:"top_msg_id,omitempty"`
}

// Command is an entry of the bot's command menu.
type Command struct {
	Command     string `json:"command"`
	Description string `json:"description"`
}

// RPCError is an MTProto error: 420 FLOOD_WAIT_3 has Code 420, Type
// "FLOOD_WAIT" and Argument 3.
type RPCError struct {
	Code     int    `json:"code"`
	Type     string `json:"type"`
	Argument int    `json:"argument,omitempty"`
	Message  string `json:"message"`
}

// Events are the bot's calls after a sequence number.
type Events struct {
	Events []Event `json:"events"`
	// Last is the sequence number of the last call so far, matching or
	// not: pass it as After to wait for later calls.
	Last int `json:"last"`
}

// EventsQuery selects events.
type EventsQuery struct {
	// After is a sequence number: only later events.
	After int
	// Wait long-polls up to this long until there is a matching event.
	Wait time.Duration
	// Chat keeps the events addressed to one chat (0: any).
	Chat int64
	// Kinds keeps events of these kinds (none: any).
	Kinds []string
}

// SendRequest sends a message as a user.
type SendRequest struct {
	// User defaults to the first admin.
	User int64 `json:"user,omitempty"`
	// Chat defaults to the user's private chat.
	Chat    int64  `json:"chat,omitempty"`
	Text    string `json:"text"`
	ReplyTo int    `json:"reply_to,omitempty"`
	// Topic is a forum topic's ID.
	Topic int `json:"topic,omitempty"`
	// Forwarded makes it a forward, from user ForwardedFrom (0: a hidden
	// sender).
	Forwarded     bool  `json:"forwarded,omitempty"`
	ForwardedFrom int64 `json:"forwarded_from,omitempty"`
	// Document attaches a file, Photo a photo (JPEG bytes).
	Document *Document `json:"document,omitempty"`
	Photo    []byte    `json:"photo,omitempty"`
}

// Document is a file a user sends. Data is base64 in JSON. Size, with no
// Data, sends a file of that size whose content the server does not keep,
// as for a file it let go: its message gives the size, and a download of
// it fails (FILE_REFERENCE_EXPIRED). It tests size limits without moving
// the bytes.
type Document struct {
	Name string `json:"name"`
	MIME string `json:"mime"`
	Data []byte `json:"data"`
	Size int64  `json:"size,omitempty"`
}

// PressRequest presses a button.
type PressRequest struct {
	// User defaults to the first admin, Chat to the user's private chat.
	User  int64 `json:"user,omitempty"`
	Chat  int64 `json:"chat,omitempty"`
	MsgID int   `json:"msg_id"`
	// Data is the callback data; nil presses the message's first
	// callback button.
	Data *string `json:"data,omitempty"`
	// NoWait returns once the press is delivered, without the answer.
	NoWait bool `json:"no_wait,omitempty"`
	// Timeout bounds the wait for the bot's answer. Defaults to 15s; the
	// Client sets it from its context's deadline.
	Timeout Duration `json:"timeout,omitempty"`
}

// Answer is the bot's answer to a press: its toast.
type Answer struct {
	QueryID int64 `json:"query_id"`
	// Data is the callback data that was pressed.
	Data  string `json:"data"`
	Text  string `json:"text"`
	Alert bool   `json:"alert,omitempty"`
	URL   string `json:"url,omitempty"`
	// Seq is the answer's event (0 with NoWait).
	Seq int `json:"seq,omitempty"`
}

// StopDraftRequest presses Stop on a draft in a user's private chat.
type StopDraftRequest struct {
	// User defaults to the first admin.
	User int64 `json:"user,omitempty"`
	// RandomID and TopMsgID name the draft; RandomID 0 stops the last
	// draft the bot streamed to the user.
	RandomID int64 `json:"random_id,omitempty"`
	TopMsgID int   `json:"top_msg_id,omitempty"`
}

// DeleteRequest deletes a message as its author or an admin would.
type DeleteRequest struct {
	Chat int64 `json:"chat"`
	ID   int   `json:"id"`
}

// GuestRequest sends a guest query: a message that mentions the bot in a
// chat it is not in.
type GuestRequest struct {
	// User defaults to the first admin.
	User int64 `json:"user,omitempty"`
	// Chat defaults to the first chat the bot is not a member of.
	Chat int64  `json:"chat,omitempty"`
	Text string `json:"text"`
	// ReplyTo is a message of the chat that the query replies to; the bot
	// gets it as a reference message.
	ReplyTo int `json:"reply_to,omitempty"`
}

// GuestQuery is a guest query that was sent.
type GuestQuery struct {
	QueryID int64   `json:"query_id"`
	Message Message `json:"message"`
}

// FaultRequest makes the next N calls of a method fail.
type FaultRequest struct {
	// Method is a TL name, "messages.editMessage".
	Method string `json:"method"`
	// N calls fail; a negative N fails every call until faults are
	// cleared.
	N int `json:"n"`
	// Error is the error type, "FLOOD_WAIT_3"; its code follows Telegram
	// (faketg.RPCError).
	Error string `json:"error"`
}

// UserRequest adds a user.
type UserRequest struct {
	// ID defaults to the next free one.
	ID        int64  `json:"id,omitempty"`
	Username  string `json:"username,omitempty"`
	FirstName string `json:"first_name,omitempty"`
	Admin     bool   `json:"admin,omitempty"`
}

// TopicRequest creates a forum topic.
type TopicRequest struct {
	Title string `json:"title"`
}

// Duration is a time.Duration that is a string such as "15s" in JSON.
type Duration time.Duration

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON implements json.Unmarshaler. It takes a string for
// time.ParseDuration or a number of nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n int64
		if err := json.Unmarshal(b, &n); err != nil {
			return fmt.Errorf("duration: %s", b)
		}
		*d = Duration(n)
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}
