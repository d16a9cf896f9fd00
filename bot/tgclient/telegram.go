// Package tgclient connects the bot to Telegram with gotd/td: the client
// and its bot login, the updates manager with gap recovery, flood-wait
// handling, the session and the updates state kept in the cluster, the
// update handlers, and the bot.Telegram calls, sent and edited through
// gotd's message.Sender.
package tgclient

import (
	"cmp"
	"context"
	"fmt"
	"sync"

	"github.com/gotd/td/bin"
	"github.com/gotd/td/telegram"
	"github.com/gotd/td/telegram/message"
	"github.com/gotd/td/telegram/message/markup"
	"github.com/gotd/td/telegram/message/unpack"
	"github.com/gotd/td/tg"
	"github.com/gotd/td/tgerr"

	"shelljob.dev/shelljob/bot"
)

// API implements bot.Telegram on a gotd client. The client is replaced
// when the bot logs in again (Client.Run); calls then go to the new one.
type API struct {
	// homeDC is the DC of the bot's connection; guest answers held on
	// another DC are edited through a connection to it.
	homeDC int

	mu  sync.Mutex
	raw *tg.Client
	// send is gotd's message sender on raw.
	send *message.Sender
	// client makes the connections to other DCs; nil when the API runs
	// on a bare invoker (narrow tests), which then serves every DC.
	client *telegram.Client
	dcs    map[int]*tg.Client
}

var _ bot.Telegram = (*API)(nil)

// NewAPI returns the bot.Telegram of client, whose connection is on homeDC.
func NewAPI(client *telegram.Client, homeDC int) *API {
	a := &API{homeDC: homeDC}
	a.setClient(client)
	return a
}

// newInvokerAPI returns an API whose calls all go to inv.
func newInvokerAPI(inv tg.Invoker) *API {
	a := &API{}
	a.setInvoker(inv, nil)
	return a
}

// setClient points the calls at client.
func (a *API) setClient(client *telegram.Client) { a.setInvoker(client, client) }

func (a *API) setInvoker(inv tg.Invoker, client *telegram.Client) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.raw = tg.NewClient(inv)
	a.send = message.NewSender(a.raw)
	a.client, a.dcs = client, map[int]*tg.Client{}
}

// home is the client of the bot's own DC.
func (a *API) home() *tg.Client {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.raw
}

// sender is gotd's message sender on the bot's own DC, for a chat in
// forum topic topic (0: none). gotd's builder replies by message id
// alone; in a topic, each message also names the topic (top_msg_id), so
// that a reply whose replied-to message went meanwhile stays in its topic
// rather than land in General.
func (a *API) sender(topic int) *message.Sender {
	a.mu.Lock()
	defer a.mu.Unlock()
	if topic == 0 {
		return a.send
	}
	return message.NewSender(tg.NewClient(inTopic{next: a.raw.Invoker(), topic: topic}))
}

// inTopic sets top_msg_id on the reply of each message a request sends.
type inTopic struct {
	next  tg.Invoker
	topic int
}

func (t inTopic) Invoke(ctx context.Context, input bin.Encoder, output bin.Decoder) error {
	if r, ok := input.(interface {
		GetReplyTo() (tg.InputReplyToClass, bool)
	}); ok {
		if to, ok := r.GetReplyTo(); ok {
			if m, ok := to.(*tg.InputReplyToMessage); ok {
				m.SetTopMsgID(t.topic)
			}
		}
	}
	return t.next.Invoke(ctx, input, output)
}

// InputPeer is the MTProto peer of chat. A chat read back from a job's
// annotation may hold any kind, so an unknown one is an error.
func InputPeer(c bot.Chat) (tg.InputPeerClass, error) {
	switch c.Kind {
	case bot.PeerUser:
		return &tg.InputPeerUser{UserID: c.PeerID, AccessHash: c.AccessHash}, nil
	case bot.PeerChat:
		return &tg.InputPeerChat{ChatID: c.PeerID}, nil
	case bot.PeerChannel:
		return &tg.InputPeerChannel{ChannelID: c.PeerID, AccessHash: c.AccessHash}, nil
	default:
		return nil, fmt.Errorf("chat %d has an unknown peer kind %q", c.ID, c.Kind)
	}
}

// to starts gotd's request in chat.
func (a *API) to(chat bot.Chat) (*message.RequestBuilder, error) {
	peer, err := InputPeer(chat)
	if err != nil {
		return nil, err
	}
	return a.sender(chat.Topic).To(peer), nil
}

func buttonsMarkup(rows [][]bot.Button) tg.ReplyMarkupClass {
	if rows == nil {
		return nil
	}
	var rs []tg.KeyboardInlineButtonRow
	for _, row := range rows {
		var bs []tg.KeyboardInlineButton
		for _, b := range row {
			bs = append(bs, markup.Callback(b.Text, []byte(b.Data)))
		}
		rs = append(rs, markup.InlineButtonRow(bs...))
	}
	return markup.InlineKeyboard(rs...)
}

// Send implements bot.Telegram: messages.sendMessage, or messages.sendMedia
// for a file (a photo, or a document).
func (a *API) Send(ctx context.Context, r bot.SendRequest) (int, error) {
	rb, err := a.to(r.Chat)
	if err != nil {
		return 0, err
	}
	b := rb.NoWebpage().Markup(buttonsMarkup(r.Buttons))
	// In a topic, a message that replies to nothing replies to the topic.
	if id := cmp.Or(r.ReplyTo, r.Chat.Topic); id != 0 {
		b.Reply(id)
	}
	if r.Silent {
		b.Silent()
	}
	if r.File == nil {
		return unpack.MessageID(b.Text(ctx, r.Text))
	}
	f := *r.File
	up, err := upload(ctx, a.home(), f)
	if err != nil {
		return 0, fmt.Errorf("upload %s: %w", f.Name, err)
	}
	var media message.MediaOption = documentMedia(up, f.Name)
	if f.Photo {
		media = message.UploadedPhoto(up)
	}
	id, err := unpack.MessageID(b.Media(ctx, media))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", f.Name, err)
	}
	return id, nil
}

// Edit implements bot.Telegram. An edit that changes nothing counts as
// done.
func (a *API) Edit(ctx context.Context, r bot.EditRequest) error {
	b, err := a.to(r.Chat)
	if err != nil {
		return err
	}
	_, err = b.NoWebpage().Markup(buttonsMarkup(r.Buttons)).Edit(r.ID).Text(ctx, r.Text)
	if tgerr.Is(err, "MESSAGE_NOT_MODIFIED") {
		return nil
	}
	return err
}

// Delete implements bot.Telegram: messages.deleteMessages for everyone,
// or channels.deleteMessages.
func (a *API) Delete(ctx context.Context, chat bot.Chat, id int) error {
	b, err := a.to(chat)
	if err != nil {
		return err
	}
	_, err = b.Revoke().Messages(ctx, id)
	return err
}

// Draft implements bot.Telegram: messages.setTyping with a text draft that
// has a Stop button.
func (a *API) Draft(ctx context.Context, r bot.DraftRequest) error {
	b, err := a.to(r.Chat)
	if err != nil {
		return err
	}
	return b.TypingAction().ThreadID(r.Chat.Topic).Custom(ctx, &tg.SendMessageTextDraftAction{
		CanStop: true, RandomID: r.RandomID,
		Text: tg.TextWithEntities{Text: r.Text, Entities: []tg.MessageEntityClass{}},
	})
}

// AnswerCallback implements bot.Telegram.
func (a *API) AnswerCallback(ctx context.Context, qid int64, text string) error {
	if _, err := a.home().MessagesSetBotCallbackAnswer(ctx, &tg.MessagesSetBotCallbackAnswerRequest{QueryID: qid, Message: text}); err != nil {
		return fmt.Errorf("answer callback: %w", err)
	}
	return nil
}
