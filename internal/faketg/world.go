package faketg

import (
	"fmt"
	"slices"
	"time"

	"github.com/gotd/td/bin"
	"github.com/gotd/td/tg"
)

// User is a Telegram user of the fake. Create one with Server.NewUser.
// Its fields are read-only.
type User struct {
	s *Server

	ID         int64
	AccessHash int64
	FirstName  string
	Username   string
	// Admin is a label for tests and cmd/faketg (Server.Admins); Telegram
	// has no such thing, the bot decides who is an admin.
	Admin bool

	private *Chat
}

// UserOptions describe a new user.
type UserOptions struct {
	// ID defaults to the next free ID from 1000001.
	ID int64
	// FirstName defaults to "User<ID>".
	FirstName string
	// Username, without "@". Empty by default.
	Username string
	// Admin labels the user as one of the bot's admins.
	Admin bool
}

func (u *User) tg() *tg.User {
	v := &tg.User{
		ID:         u.ID,
		AccessHash: u.AccessHash,
		FirstName:  u.FirstName,
	}
	v.SetFlags()
	if u.Username != "" {
		v.SetUsername(u.Username)
	}
	v.SetAccessHash(u.AccessHash)
	v.SetFirstName(u.FirstName)
	return v
}

// Private is the user's private chat with the bot.
func (u *User) Private() *Chat { return u.private }

func (u *User) String() string {
	if u.Username != "" {
		return fmt.Sprintf("@%s(%d)", u.Username, u.ID)
	}
	return fmt.Sprintf("%s(%d)", u.FirstName, u.ID)
}

// ChatKind is the kind of a Chat.
type ChatKind int

// Chat kinds.
const (
	// Private is a user's private chat with the bot (peerUser).
	Private ChatKind = iota + 1
	// Group is a basic group (peerChat). Its messages share the bot's
	// message ID sequence and pts with private chats.
	Group
	// Supergroup is a megagroup channel (peerChannel) with its own message
	// IDs and pts, served through updates.getChannelDifference.
	Supergroup
	// Forum is a supergroup with topics.
	Forum
)

func (k ChatKind) String() string {
	switch k {
	case Private:
		return "private"
	case Group:
		return "group"
	case Supergroup:
		return "supergroup"
	case Forum:
		return "forum"
	default:
		return fmt.Sprintf("ChatKind(%d)", int(k))
	}
}

// Chat is a chat of the fake: a private chat with the bot, a group, a
// supergroup or a forum. Its fields are read-only.
type Chat struct {
	s *Server

	Kind ChatKind
	// ID is the user's ID for a private chat, else the chat or channel ID
	// (positive, as in MTProto).
	ID         int64
	AccessHash int64
	Title      string
	// User is the other side of a private chat.
	User *User
	// BotMember is false for a chat the bot is not in (guest mode): its
	// messages are not delivered to the bot.
	BotMember bool

	// Guarded by the messages service.
	msgs      map[int]*Message
	nextMsgID int   // channels and chats without the bot
	drafts    *bool // nil: default for the kind
	topics    []*Topic
	// A channel's own pts box, guarded by the updates service.
	pts     int
	history []ptsEntry
}

// Channel reports whether the chat is a channel in MTProto (supergroup or
// forum).
func (c *Chat) Channel() bool { return c.Kind == Supergroup || c.Kind == Forum }

// Peer is the chat's peer as the bot sees it.
func (c *Chat) Peer() tg.PeerClass {
	switch c.Kind {
	case Private:
		return &tg.PeerUser{UserID: c.ID}
	case Group:
		return &tg.PeerChat{ChatID: c.ID}
	default:
		return &tg.PeerChannel{ChannelID: c.ID}
	}
}

// BotAPIID is the chat's ID in Bot API form: the user ID, -chatID, or
// -100…channelID.
func (c *Chat) BotAPIID() int64 {
	switch c.Kind {
	case Private:
		return c.ID
	case Group:
		return -c.ID
	default:
		return -1000000000000 - c.ID
	}
}

func (c *Chat) String() string {
	if c.Kind == Private {
		return "private:" + c.User.String()
	}
	return fmt.Sprintf("%s:%q(%d)", c.Kind, c.Title, c.ID)
}

func (c *Chat) tg() tg.ChatClass {
	switch c.Kind {
	case Group:
		ch := &tg.Chat{ID: c.ID, Title: c.Title, Photo: &tg.ChatPhotoEmpty{}, ParticipantsCount: 2, Date: 1, Version: 1}
		if !c.BotMember {
			ch.SetLeft(true)
		}
		return ch
	case Supergroup, Forum:
		ch := &tg.Channel{ID: c.ID, Title: c.Title, Photo: &tg.ChatPhotoEmpty{}, Date: 1}
		ch.SetMegagroup(true)
		ch.SetAccessHash(c.AccessHash)
		if c.Kind == Forum {
			ch.SetForum(true)
		}
		if !c.BotMember {
			ch.SetLeft(true)
		}
		return ch
	}
	return nil
}

// Topic is a forum topic. ID is the ID of the message that created it.
type Topic struct {
	Chat  *Chat
	ID    int
	Title string
}

// GeneralTopicID is the ID of a forum's General topic.
const GeneralTopicID = 1

// Button is an inline keyboard button.
type Button struct {
	Text string
	// Type is "callback", "url", "copy", "switch_inline" or the TL name of
	// another inlineButtonType.
	Type string
	Data []byte
	URL  string
}

// Media is a file in a message: sent by a user (with SendBuilder.Document
// or Photo) or uploaded by the bot (messages.sendMedia).
type Media struct {
	// Photo is true for a photo, false for a document.
	Photo    bool
	Filename string
	MIME     string
	// ForceFile is the document's force_file flag (bot uploads).
	ForceFile bool
	// Data is the file's content; nil once the server let it go to stay
	// within Options.FileBytes.
	Data []byte
	// Size is the file's size, kept when its Data goes.
	Size int

	id, accessHash int64
}

// Message is a message in a chat, in its current state. Values returned by
// the Server are copies.
type Message struct {
	ID   int
	Chat *Chat
	// From is the user who sent it; nil for the bot's own messages.
	From *User
	// Out is true for the bot's messages.
	Out      bool
	Text     string
	Entities []tg.MessageEntityClass
	// ReplyTo is the replied-to message ID (0 for none). A message in a
	// forum topic that replies to nothing has ReplyTo 0 and TopicID set;
	// the bot sees reply_to{forum_topic, reply_to_msg_id: topic}, as
	// Telegram sends it.
	ReplyTo int
	// TopicID is the forum topic (0 outside forums).
	TopicID   int
	Forwarded bool
	Silent    bool
	NoWebpage bool
	Buttons   [][]Button
	Media     *Media
	Date      time.Time
	// Edited is the time of the last edit (zero if never edited).
	Edited  time.Time
	Edits   int
	Deleted bool
	// InlineID is set on a guest answer (setBotGuestChatResult).
	InlineID *tg.InputBotInlineMessageID64
	// GuestQuery is the query a guest answer belongs to.
	GuestQuery int64
	// ViaBot: the user sent it via the bot (via_bot_id).
	ViaBot bool

	fwd *tg.MessageFwdHeader
}

func (m *Message) clone() Message {
	c := *m
	c.Buttons = slices.Clone(m.Buttons)
	c.Entities = slices.Clone(m.Entities)
	return c
}

// tg is the message as the bot sees it.
func (m *Message) tg() *tg.Message {
	v := &tg.Message{
		ID:      m.ID,
		PeerID:  m.Chat.Peer(),
		Date:    int(m.Date.Unix()),
		Message: m.Text,
	}
	v.SetOut(m.Out)
	v.SetSilent(m.Silent)
	if m.Out {
		v.SetFromID(&tg.PeerUser{UserID: m.Chat.s.opts.Bot.ID})
	} else if m.From != nil {
		v.SetFromID(&tg.PeerUser{UserID: m.From.ID})
	}
	if m.fwd != nil {
		v.SetFwdFrom(*m.fwd)
	}
	if m.ViaBot {
		v.SetViaBotID(m.Chat.s.opts.Bot.ID)
	}
	if m.ReplyTo != 0 || m.TopicID != 0 {
		h := &tg.MessageReplyHeader{}
		if m.TopicID != 0 {
			h.SetForumTopic(true)
		}
		switch {
		case m.ReplyTo != 0:
			h.SetReplyToMsgID(m.ReplyTo)
			if m.TopicID != 0 && m.ReplyTo != m.TopicID {
				h.SetReplyToTopID(m.TopicID)
			}
		case m.TopicID != 0:
			h.SetReplyToMsgID(m.TopicID)
		}
		v.SetReplyTo(h)
	}
	if len(m.Entities) > 0 {
		v.SetEntities(cloneEntities(m.Entities))
	}
	if len(m.Buttons) > 0 {
		v.SetReplyMarkup(buttonsToMarkup(m.Buttons))
	}
	if !m.Edited.IsZero() {
		v.SetEditDate(int(m.Edited.Unix()))
	}
	if md := m.Media; md != nil {
		v.SetMedia(md.tg(m.Chat.s.opts.DC, m.Date))
	}
	return v
}

func (md *Media) tg(dc int, date time.Time) tg.MessageMediaClass {
	if md.Photo {
		return &tg.MessageMediaPhoto{Photo: &tg.Photo{
			ID:            md.id,
			AccessHash:    md.accessHash,
			FileReference: []byte{1},
			Date:          int(date.Unix()),
			Sizes:         []tg.PhotoSizeClass{&tg.PhotoSize{Type: "x", W: 800, H: 600, Size: md.Size}},
			DCID:          dc,
		}}
	}
	attrs := []tg.DocumentAttributeClass{}
	if md.Filename != "" {
		attrs = append(attrs, &tg.DocumentAttributeFilename{FileName: md.Filename})
	}
	return &tg.MessageMediaDocument{Document: &tg.Document{
		ID:            md.id,
		AccessHash:    md.accessHash,
		FileReference: []byte{1},
		Date:          int(date.Unix()),
		MimeType:      md.MIME,
		Size:          int64(md.Size),
		DCID:          dc,
		Attributes:    attrs,
	}}
}

func buttonsToMarkup(rows [][]Button) *tg.ReplyInlineMarkup {
	m := &tg.ReplyInlineMarkup{}
	for _, row := range rows {
		var r tg.KeyboardInlineButtonRow
		for _, b := range row {
			var t tg.InlineButtonTypeClass
			switch b.Type {
			case "url":
				t = &tg.InlineButtonTypeURL{URL: b.URL}
			case "copy":
				t = &tg.InlineButtonTypeCopy{CopyText: string(b.Data)}
			default:
				t = &tg.InlineButtonTypeCallback{Data: b.Data}
			}
			r.Buttons = append(r.Buttons, tg.KeyboardInlineButton{Text: b.Text, Type: t})
		}
		m.Rows = append(m.Rows, r)
	}
	return m
}

// markupButtons converts a bot's reply markup. ok is false when the
// markup is not an inline keyboard (nil buttons).
func markupButtons(rm tg.ReplyMarkupClass) [][]Button {
	m, ok := rm.(*tg.ReplyInlineMarkup)
	if !ok {
		return nil
	}
	rows := make([][]Button, 0, len(m.Rows))
	for _, r := range m.Rows {
		row := make([]Button, 0, len(r.Buttons))
		for _, b := range r.Buttons {
			btn := Button{Text: b.Text}
			switch t := b.Type.(type) {
			case *tg.InlineButtonTypeCallback:
				btn.Type, btn.Data = "callback", t.Data
			case *tg.InlineButtonTypeURL:
				btn.Type, btn.URL = "url", t.URL
			case *tg.InlineButtonTypeCopy:
				btn.Type, btn.Data = "copy", []byte(t.CopyText)
			case *tg.InlineButtonTypeSwitchInline:
				btn.Type, btn.Data = "switch_inline", []byte(t.Query)
			default:
				btn.Type = fmt.Sprintf("%T", t)
			}
			row = append(row, btn)
		}
		rows = append(rows, row)
	}
	return rows
}

// cloneEntities deep-copies entities: encoding a tg object writes its
// flags, so objects sent to the bot must not be shared with the state.
func cloneEntities(es []tg.MessageEntityClass) []tg.MessageEntityClass {
	out := make([]tg.MessageEntityClass, 0, len(es))
	for _, e := range es {
		out = append(out, cloneTL(e, tg.DecodeMessageEntity))
	}
	return out
}

// cloneTL deep-copies a TL object through its encoding.
func cloneTL[T bin.Encoder](v T, decode func(*bin.Buffer) (T, error)) T {
	var b bin.Buffer
	if err := v.Encode(&b); err != nil {
		panic(fmt.Sprintf("faketg: encode %T: %v", v, err))
	}
	c, err := decode(&b)
	if err != nil {
		panic(fmt.Sprintf("faketg: decode %T: %v", v, err))
	}
	return c
}
