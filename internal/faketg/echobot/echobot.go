// Package echobot is a small gotd bot for trying the fake Telegram
// (cmd/faketg) without the real bot: it connects the way a production bot
// does, from a "host:port" DC address and a PEM public key, and answers
// every message with a draft (private chats), a reply with a Stop button,
// an edit, and for "file" a .txt document. It answers button presses with
// a toast and guest queries with an answer it then edits.
package echobot

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"github.com/go-faster/errors"

	"github.com/gotd/td/crypto"
	"github.com/gotd/td/session"
	"github.com/gotd/td/telegram"
	"github.com/gotd/td/telegram/dcs"
	"github.com/gotd/td/telegram/message"
	"github.com/gotd/td/telegram/message/markup"
	"github.com/gotd/td/telegram/message/styling"
	"github.com/gotd/td/telegram/updates"
	updhook "github.com/gotd/td/telegram/updates/hook"
	"github.com/gotd/td/telegram/uploader"
	"github.com/gotd/td/tg"
)

// Config tells the bot where the fake is.
type Config struct {
	// Addr is the DC address, "host:port".
	Addr string
	// PublicKeyPEM is the server's key.
	PublicKeyPEM []byte
	// DC defaults to 2.
	DC    int
	Token string
	// Resolver dials the DC; defaults to gotd's (dcs.DefaultResolver).
	Resolver dcs.Resolver
}

// ClientOptions builds telegram.Options from a DC address and a PEM key,
// as a bot's configuration would.
func ClientOptions(addr string, pemKey []byte, dc int) (telegram.Options, error) {
	if dc == 0 {
		dc = 2
	}
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return telegram.Options{}, errors.Wrap(err, "address")
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return telegram.Options{}, errors.Wrap(err, "port")
	}
	keys, err := crypto.ParseRSAPublicKeys(pemKey)
	if err != nil {
		return telegram.Options{}, errors.Wrap(err, "public key")
	}
	if len(keys) == 0 {
		return telegram.Options{}, errors.New("public key: no PEM block")
	}
	opts := telegram.Options{
		DC:     dc,
		DCList: dcs.List{Options: []tg.DCOption{{ID: dc, IPAddress: host, Port: port}}},
	}
	for _, k := range keys {
		opts.PublicKeys = append(opts.PublicKeys, telegram.PublicKey{RSA: k})
	}
	return opts, nil
}

// Run runs the bot until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	opts, err := ClientOptions(cfg.Addr, cfg.PublicKeyPEM, cfg.DC)
	if err != nil {
		return err
	}
	d := tg.NewUpdateDispatcher()
	gaps := updates.New(updates.Config{Handler: d})
	opts.Resolver = cfg.Resolver
	opts.SessionStorage = &session.StorageMemory{}
	opts.UpdateHandler = gaps
	opts.Middlewares = []telegram.Middleware{updhook.UpdateHook(gaps.Handle), updhook.AffectedHook(gaps)}
	client := telegram.NewClient(telegram.TestAppID, telegram.TestAppHash, opts)
	api := client.API()
	sender := message.NewSender(api)

	answer := func(ctx context.Context, e tg.Entities, u message.AnswerableMessageUpdate, m *tg.Message) error {
		if m.Out {
			return nil
		}
		if _, private := m.PeerID.(*tg.PeerUser); private {
			if err := sender.Answer(e, u).TypingAction().TextDraft(ctx, true, false, int64(m.ID),
				tg.TextWithEntities{Text: "thinking about " + m.Message, Entities: []tg.MessageEntityClass{}}); err != nil {
				return errors.Wrap(err, "draft")
			}
		}
		res, err := sender.Reply(e, u).Silent().Row(markup.Callback("⏹ Stop", fmt.Appendf(nil, "shk:%d", m.ID))).Text(ctx, "⏳ echo: "+m.Message)
		if err != nil {
			return errors.Wrap(err, "reply")
		}
		id, ok := sentID(res)
		if !ok {
			return errors.Errorf("no message ID in %T", res)
		}
		if _, err := sender.Answer(e, u).Edit(id).Text(ctx, "echo: "+m.Message); err != nil {
			return errors.Wrap(err, "edit")
		}
		if m.Message == "file" {
			f, err := uploader.NewUploader(api).FromBytes(ctx, "echo.txt", []byte("echo file\n"))
			if err != nil {
				return errors.Wrap(err, "upload")
			}
			if _, err := sender.Reply(e, u).Media(ctx, message.UploadedDocument(f, styling.Plain("the file")).
				MIME("text/plain").Filename("echo.txt").ForceFile(true)); err != nil {
				return errors.Wrap(err, "send file")
			}
		}
		return nil
	}
	d.OnNewMessage(func(ctx context.Context, e tg.Entities, u *tg.UpdateNewMessage) error {
		if m, ok := u.Message.(*tg.Message); ok {
			return answer(ctx, e, u, m)
		}
		return nil
	})
	d.OnNewChannelMessage(func(ctx context.Context, e tg.Entities, u *tg.UpdateNewChannelMessage) error {
		if m, ok := u.Message.(*tg.Message); ok {
			return answer(ctx, e, u, m)
		}
		return nil
	})
	d.OnBotCallbackQuery(func(ctx context.Context, e tg.Entities, u *tg.UpdateBotCallbackQuery) error {
		_, err := api.MessagesSetBotCallbackAnswer(ctx, &tg.MessagesSetBotCallbackAnswerRequest{
			QueryID: u.QueryID, Message: "pressed " + string(u.Data),
		})
		return err
	})
	d.OnBotGuestChatQuery(func(ctx context.Context, e tg.Entities, u *tg.UpdateBotGuestChatQuery) error {
		m, _ := u.Message.(*tg.Message)
		if m == nil {
			return nil
		}
		id, err := api.MessagesSetBotGuestChatResult(ctx, &tg.MessagesSetBotGuestChatResultRequest{
			QueryID: u.QueryID,
			Result: &tg.InputBotInlineResult{ID: "1", Type: "article", Title: "echo",
				SendMessage: &tg.InputBotInlineMessageText{Message: "⏳ " + m.Message}},
		})
		if err != nil {
			return err
		}
		_, err = api.MessagesEditInlineBotMessage(ctx, &tg.MessagesEditInlineBotMessageRequest{ID: id, Message: "guest echo: " + m.Message})
		return err
	})
	return client.Run(ctx, func(ctx context.Context) error {
		if _, err := client.Auth().Bot(ctx, cfg.Token); err != nil {
			return errors.Wrap(err, "login")
		}
		self, err := client.Self(ctx)
		if err != nil {
			return errors.Wrap(err, "self")
		}
		if _, err := api.BotsSetBotCommands(ctx, &tg.BotsSetBotCommandsRequest{
			Scope:    &tg.BotCommandScopeDefault{},
			Commands: []tg.BotCommand{{Command: "help", Description: "Help"}},
		}); err != nil {
			return errors.Wrap(err, "commands")
		}
		return gaps.Run(ctx, api, self.ID, updates.AuthOptions{IsBot: true})
	})
}

func sentID(res tg.UpdatesClass) (int, bool) {
	switch r := res.(type) {
	case *tg.UpdateShortSentMessage:
		return r.ID, true
	case *tg.Updates:
		for _, u := range r.Updates {
			switch u := u.(type) {
			case *tg.UpdateMessageID:
				return u.ID, true
			case *tg.UpdateNewMessage:
				return u.Message.GetID(), true
			case *tg.UpdateNewChannelMessage:
				return u.Message.GetID(), true
			}
		}
	}
	return 0, false
}
