package tgclient

import (
	"context"
	"fmt"

	"github.com/gotd/td/tg"
	"github.com/gotd/td/tgerr"

	"shelljob.dev/shelljob/bot"
	"shelljob.dev/shelljob/bot/botmetrics"
)

// A guest answer is an inline message: gotd's message.Sender has no
// builder for messages.setBotGuestChatResult and
// messages.editInlineBotMessage, so these requests are built here.

// AnswerGuest implements bot.Telegram: messages.setBotGuestChatResult.
func (a *API) AnswerGuest(ctx context.Context, qid int64, text string) (bot.GuestMessage, error) {
	id, err := a.home().MessagesSetBotGuestChatResult(ctx, &tg.MessagesSetBotGuestChatResultRequest{
		QueryID: qid,
		Result: &tg.InputBotInlineResult{
			ID: "1", Type: "article", Title: "shell",
			SendMessage: &tg.InputBotInlineMessageText{Message: text, NoWebpage: true},
		},
	})
	if err != nil {
		return bot.GuestMessage{}, fmt.Errorf("guest answer: %w", err)
	}
	switch id := id.(type) {
	case *tg.InputBotInlineMessageID64:
		return bot.GuestMessage{DC: id.DCID, OwnerID: id.OwnerID, ID: int64(id.ID), AccessHash: id.AccessHash}, nil
	case *tg.InputBotInlineMessageID:
		return bot.GuestMessage{DC: id.DCID, ID: id.ID, AccessHash: id.AccessHash, Legacy: true}, nil
	default:
		return bot.GuestMessage{}, fmt.Errorf("guest answer: unknown id %T", id)
	}
}

func inlineID(m bot.GuestMessage) tg.InputBotInlineMessageIDClass {
	if m.Legacy {
		return &tg.InputBotInlineMessageID{DCID: m.DC, ID: m.ID, AccessHash: m.AccessHash}
	}
	return &tg.InputBotInlineMessageID64{DCID: m.DC, OwnerID: m.OwnerID, ID: int(m.ID), AccessHash: m.AccessHash}
}

// EditGuest implements bot.Telegram: messages.editInlineBotMessage on the
// DC that holds the answer. A file is uploaded and stored first with
// messages.uploadMedia (to the bot's own chat, as an inline answer has
// none the bot may send to), and the edit names that document.
func (a *API) EditGuest(ctx context.Context, r bot.GuestEditRequest) error {
	req := &tg.MessagesEditInlineBotMessageRequest{ID: inlineID(r.Message), NoWebpage: r.File == nil}
	req.SetMessage(r.Text)
	if r.File != nil {
		doc, err := a.storeDocument(ctx, *r.File)
		if err != nil {
			return err
		}
		req.SetMedia(&tg.InputMediaDocument{ID: doc.AsInput()})
	}
	api, err := a.onDC(ctx, r.Message.DC)
	if err != nil {
		return err
	}
	_, err = api.MessagesEditInlineBotMessage(ctx, req)
	switch {
	case r.File != nil && err != nil:
		return fmt.Errorf("edit guest answer into %s: %w", r.File.Name, err)
	case tgerr.Is(err, "MESSAGE_NOT_MODIFIED"):
		return nil
	case err != nil:
		return fmt.Errorf("edit guest answer: %w", err)
	}
	return nil
}

// storeDocument uploads f and stores it as a document in no message.
func (a *API) storeDocument(ctx context.Context, f bot.File) (*tg.Document, error) {
	up, err := upload(ctx, a.home(), f)
	if err != nil {
		return nil, fmt.Errorf("upload %s: %w", f.Name, err)
	}
	stored, err := a.sender(0).Self().UploadMedia(ctx, documentMedia(up, f.Name))
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", f.Name, err)
	}
	md, ok := stored.(*tg.MessageMediaDocument)
	if !ok {
		return nil, fmt.Errorf("store %s: got %T", f.Name, stored)
	}
	doc, ok := md.Document.(*tg.Document)
	if !ok {
		return nil, fmt.Errorf("store %s: got %T", f.Name, md.Document)
	}
	return doc, nil
}

// onDC is the client of DC dc, connected on first use.
func (a *API) onDC(ctx context.Context, dc int) (*tg.Client, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if dc == 0 || dc == a.homeDC || a.client == nil {
		return a.raw, nil
	}
	if c, ok := a.dcs[dc]; ok {
		return c, nil
	}
	inv, err := a.client.DC(ctx, dc, 1)
	if err != nil {
		return nil, fmt.Errorf("connect to DC %d: %w", dc, err)
	}
	c := tg.NewClient(botmetrics.Invoker(inv))
	a.dcs[dc] = c
	return c, nil
}
