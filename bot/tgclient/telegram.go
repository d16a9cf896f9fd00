// Package tgclient connects the bot to Telegram with gotd/td: the client
// and its bot login, the updates manager with gap recovery, flood-wait
// handling, the session and the updates state kept in the cluster, and the
// bot.Telegram calls.
package tgclient

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"mime"
	"os"
	"path"
	"sync"

	"github.com/gotd/td/telegram"
	"github.com/gotd/td/telegram/downloader"
	"github.com/gotd/td/telegram/message/markup"
	"github.com/gotd/td/telegram/uploader"
	"github.com/gotd/td/tg"
	"github.com/gotd/td/tgerr"

	"shelljob.dev/shelljob/bot"
	"shelljob.dev/shelljob/bot/botmetrics"
)

// API implements bot.Telegram on a gotd client. The client is replaced
// when the bot logs in again (Client.Run); calls then go to the new one.
type API struct {
	// homeDC is the DC of the bot's connection; guest answers held on
	// another DC are edited through a connection to it.
	homeDC int

	mu     sync.Mutex
	api    *tg.Client
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

// setClient points the calls at client.
func (a *API) setClient(client *telegram.Client) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.api, a.client, a.dcs = client.API(), client, map[int]*tg.Client{}
}

// home is the client of the bot's own DC.
func (a *API) home() *tg.Client {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.api
}

func randomID() int64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return int64(binary.LittleEndian.Uint64(b[:]))
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

func replyTo(c bot.Chat, id int) tg.InputReplyToClass {
	if id == 0 && c.Topic == 0 {
		return nil
	}
	r := &tg.InputReplyToMessage{ReplyToMsgID: id}
	if id == 0 {
		r.ReplyToMsgID = c.Topic
	}
	if c.Topic != 0 {
		r.SetTopMsgID(c.Topic)
	}
	return r
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

// sentID finds the id of the message a send created.
func sentID(u tg.UpdatesClass, rid int64) (int, error) {
	switch u := u.(type) {
	case *tg.UpdateShortSentMessage:
		return u.ID, nil
	case *tg.Updates:
		for _, x := range u.Updates {
			if m, ok := x.(*tg.UpdateMessageID); ok && m.RandomID == rid {
				return m.ID, nil
			}
		}
		for _, x := range u.Updates {
			switch x := x.(type) {
			case *tg.UpdateNewMessage:
				return x.Message.GetID(), nil
			case *tg.UpdateNewChannelMessage:
				return x.Message.GetID(), nil
			}
		}
	case *tg.UpdatesCombined:
		for _, x := range u.Updates {
			if m, ok := x.(*tg.UpdateMessageID); ok && m.RandomID == rid {
				return m.ID, nil
			}
		}
	}
	return 0, fmt.Errorf("no message id in %T", u)
}

// SendText implements bot.Telegram.
func (a *API) SendText(ctx context.Context, chat bot.Chat, reply int, text string, silent bool, buttons [][]bot.Button) (int, error) {
	peer, err := InputPeer(chat)
	if err != nil {
		return 0, err
	}
	rid := randomID()
	req := &tg.MessagesSendMessageRequest{
		Peer: peer, Message: text, RandomID: rid, NoWebpage: true, Silent: silent,
	}
	if r := replyTo(chat, reply); r != nil {
		req.SetReplyTo(r)
	}
	if m := buttonsMarkup(buttons); m != nil {
		req.SetReplyMarkup(m)
	}
	u, err := a.home().MessagesSendMessage(ctx, req)
	if err != nil {
		return 0, fmt.Errorf("send message: %w", err)
	}
	return sentID(u, rid)
}

// EditText implements bot.Telegram. An edit that changes nothing counts as
// done.
func (a *API) EditText(ctx context.Context, chat bot.Chat, id int, text string, buttons [][]bot.Button) error {
	peer, err := InputPeer(chat)
	if err != nil {
		return err
	}
	req := &tg.MessagesEditMessageRequest{Peer: peer, ID: id, NoWebpage: true}
	req.SetMessage(text)
	if m := buttonsMarkup(buttons); m != nil {
		req.SetReplyMarkup(m)
	}
	_, err = a.home().MessagesEditMessage(ctx, req)
	if tgerr.Is(err, "MESSAGE_NOT_MODIFIED") {
		return nil
	}
	if err != nil {
		return fmt.Errorf("edit message: %w", err)
	}
	return nil
}

// Delete implements bot.Telegram.
func (a *API) Delete(ctx context.Context, chat bot.Chat, id int) error {
	var err error
	if chat.Kind == bot.PeerChannel {
		_, err = a.home().ChannelsDeleteMessages(ctx, &tg.ChannelsDeleteMessagesRequest{
			Channel: &tg.InputChannel{ChannelID: chat.PeerID, AccessHash: chat.AccessHash}, ID: []int{id},
		})
	} else {
		_, err = a.home().MessagesDeleteMessages(ctx, &tg.MessagesDeleteMessagesRequest{Revoke: true, ID: []int{id}})
	}
	if err != nil {
		return fmt.Errorf("delete message: %w", err)
	}
	return nil
}

// Draft implements bot.Telegram: messages.setTyping with a text draft that
// has a Stop button.
func (a *API) Draft(ctx context.Context, chat bot.Chat, rid int64, text string) error {
	peer, err := InputPeer(chat)
	if err != nil {
		return err
	}
	req := &tg.MessagesSetTypingRequest{
		Peer: peer,
		Action: &tg.SendMessageTextDraftAction{
			CanStop: true, RandomID: rid,
			Text: tg.TextWithEntities{Text: text, Entities: []tg.MessageEntityClass{}},
		},
	}
	if chat.Topic != 0 {
		req.SetTopMsgID(chat.Topic)
	}
	if _, err := a.home().MessagesSetTyping(ctx, req); err != nil {
		return fmt.Errorf("draft: %w", err)
	}
	return nil
}

// SendFile implements bot.Telegram: a photo, or a document.
func (a *API) SendFile(ctx context.Context, chat bot.Chat, reply int, f bot.File) (int, error) {
	peer, err := InputPeer(chat)
	if err != nil {
		return 0, err
	}
	up, err := upload(ctx, a.home(), f)
	if err != nil {
		return 0, fmt.Errorf("upload %s: %w", f.Name, err)
	}
	var media tg.InputMediaClass
	if f.Photo {
		media = &tg.InputMediaUploadedPhoto{File: up}
	} else {
		media = documentMedia(up, f.Name)
	}
	rid := randomID()
	req := &tg.MessagesSendMediaRequest{Peer: peer, Media: media, RandomID: rid}
	if r := replyTo(chat, reply); r != nil {
		req.SetReplyTo(r)
	}
	u, err := a.home().MessagesSendMedia(ctx, req)
	if err != nil {
		return 0, fmt.Errorf("send %s: %w", f.Name, err)
	}
	return sentID(u, rid)
}

// upload uploads f, streamed from its Reader when it has one.
func upload(ctx context.Context, api *tg.Client, f bot.File) (tg.InputFileClass, error) {
	u := uploader.NewUploader(api)
	if f.Reader != nil {
		return u.Upload(ctx, uploader.NewUpload(f.Name, f.Reader, f.Size))
	}
	return u.FromBytes(ctx, f.Name, f.Data)
}

// MessageFiles implements bot.Telegram: the document or photo of a message.
// The size the message gives is checked before the download, and the
// download stops at limit bytes all the same.
func (a *API) MessageFiles(ctx context.Context, chat bot.Chat, id int, limit int64) ([]bot.File, error) {
	ids := []tg.InputMessageClass{&tg.InputMessageID{ID: id}}
	var res tg.MessagesMessagesClass
	var err error
	if chat.Kind == bot.PeerChannel {
		res, err = a.home().ChannelsGetMessages(ctx, &tg.ChannelsGetMessagesRequest{
			Channel: &tg.InputChannel{ChannelID: chat.PeerID, AccessHash: chat.AccessHash}, ID: ids,
		})
	} else {
		res, err = a.home().MessagesGetMessages(ctx, ids)
	}
	if err != nil {
		return nil, fmt.Errorf("get message: %w", err)
	}
	msgs, ok := res.AsModified()
	if !ok {
		return nil, nil
	}
	var files []bot.File
	for _, mc := range msgs.GetMessages() {
		m, ok := mc.(*tg.Message)
		if !ok || m.Media == nil {
			continue
		}
		loc, name, size := fileLocation(m)
		if loc == nil {
			continue
		}
		if limit > 0 && size > limit {
			return files, &bot.FileTooBigError{Name: name, Size: size, Limit: limit}
		}
		f, err := download(ctx, a.home(), loc, name, limit)
		if errors.Is(err, errOverLimit) {
			return files, &bot.FileTooBigError{Name: name, Size: max(size, limit+1), Limit: limit}
		}
		if err != nil {
			return files, err
		}
		files = append(files, f)
	}
	return files, nil
}

// download streams the file at loc into a temporary file, unlinked at
// once, that the returned File reads and its Close removes.
func download(ctx context.Context, api *tg.Client, loc tg.InputFileLocationClass, name string, limit int64) (bot.File, error) {
	tmp, err := os.CreateTemp("", "shelljob-in-*")
	if err != nil {
		return bot.File{}, fmt.Errorf("download %s: %w", name, err)
	}
	if err := os.Remove(tmp.Name()); err != nil {
		tmp.Close()
		return bot.File{}, fmt.Errorf("download %s: %w", name, err)
	}
	w := &capped{w: tmp, limit: limit}
	if _, err := downloader.NewDownloader().Download(api, loc).Stream(ctx, w); err != nil {
		tmp.Close()
		if errors.Is(err, errOverLimit) {
			return bot.File{}, err
		}
		return bot.File{}, fmt.Errorf("download %s: %w", name, err)
	}
	return bot.File{Name: name, Reader: tempFile{io.NewSectionReader(tmp, 0, w.n), tmp}, Size: w.n}, nil
}

// tempFile reads a downloaded file; Close removes it.
type tempFile struct {
	*io.SectionReader
	f *os.File
}

func (t tempFile) Close() error { return t.f.Close() }

var errOverLimit = errors.New("over the size limit")

// capped writes to w, and refuses to write past limit bytes (0: no limit).
type capped struct {
	w     io.Writer
	n     int64
	limit int64
}

func (c *capped) Write(p []byte) (int, error) {
	if c.limit > 0 && c.n+int64(len(p)) > c.limit {
		return 0, errOverLimit
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// fileLocation is where the file of m is, its name, and its size as the
// message gives it.
func fileLocation(m *tg.Message) (tg.InputFileLocationClass, string, int64) {
	switch md := m.Media.(type) {
	case *tg.MessageMediaDocument:
		d, ok := md.Document.(*tg.Document)
		if !ok {
			return nil, "", 0
		}
		name := fmt.Sprintf("file%d", m.ID)
		for _, at := range d.Attributes {
			if fn, ok := at.(*tg.DocumentAttributeFilename); ok && fn.FileName != "" {
				name = path.Base(fn.FileName)
			}
		}
		return &tg.InputDocumentFileLocation{ID: d.ID, AccessHash: d.AccessHash, FileReference: d.FileReference}, name, d.Size
	case *tg.MessageMediaPhoto:
		p, ok := md.Photo.(*tg.Photo)
		if !ok || len(p.Sizes) == 0 {
			return nil, "", 0
		}
		var kind string
		var size int64
		for _, s := range p.Sizes {
			switch s := s.(type) {
			case *tg.PhotoSize:
				kind, size = s.Type, int64(s.Size)
			case *tg.PhotoSizeProgressive:
				kind, size = s.Type, 0
				for _, n := range s.Sizes {
					size = max(size, int64(n))
				}
			case interface{ GetType() string }:
				kind = s.GetType()
			}
		}
		return &tg.InputPhotoFileLocation{ID: p.ID, AccessHash: p.AccessHash, FileReference: p.FileReference, ThumbSize: kind},
			fmt.Sprintf("photo%d.jpg", m.ID), size
	}
	return nil, "", 0
}

// AnswerCallback implements bot.Telegram.
func (a *API) AnswerCallback(ctx context.Context, qid int64, text string) error {
	if _, err := a.home().MessagesSetBotCallbackAnswer(ctx, &tg.MessagesSetBotCallbackAnswerRequest{QueryID: qid, Message: text}); err != nil {
		return fmt.Errorf("answer callback: %w", err)
	}
	return nil
}

// GuestAnswer implements bot.Telegram: messages.setBotGuestChatResult.
func (a *API) GuestAnswer(ctx context.Context, qid int64, text string) (bot.GuestMessage, error) {
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
// DC that holds the answer.
func (a *API) EditGuest(ctx context.Context, m bot.GuestMessage, text string) error {
	api, err := a.onDC(ctx, m.DC)
	if err != nil {
		return err
	}
	req := &tg.MessagesEditInlineBotMessageRequest{ID: inlineID(m), NoWebpage: true}
	req.SetMessage(text)
	_, err = api.MessagesEditInlineBotMessage(ctx, req)
	if tgerr.Is(err, "MESSAGE_NOT_MODIFIED") {
		return nil
	}
	if err != nil {
		return fmt.Errorf("edit guest answer: %w", err)
	}
	return nil
}

// EditGuestFile implements bot.Telegram: the file is uploaded and stored
// with messages.uploadMedia (to the bot's own chat, as an inline answer
// has none the bot may send to), then the answer is edited into that
// document with messages.editInlineBotMessage on the DC that holds it.
func (a *API) EditGuestFile(ctx context.Context, m bot.GuestMessage, caption string, f bot.File) error {
	up, err := upload(ctx, a.home(), f)
	if err != nil {
		return fmt.Errorf("upload %s: %w", f.Name, err)
	}
	stored, err := a.home().MessagesUploadMedia(ctx, &tg.MessagesUploadMediaRequest{
		Peer:  &tg.InputPeerSelf{},
		Media: documentMedia(up, f.Name),
	})
	if err != nil {
		return fmt.Errorf("store %s: %w", f.Name, err)
	}
	md, ok := stored.(*tg.MessageMediaDocument)
	if !ok {
		return fmt.Errorf("store %s: got %T", f.Name, stored)
	}
	doc, ok := md.Document.(*tg.Document)
	if !ok {
		return fmt.Errorf("store %s: got %T", f.Name, md.Document)
	}
	api, err := a.onDC(ctx, m.DC)
	if err != nil {
		return err
	}
	req := &tg.MessagesEditInlineBotMessageRequest{
		ID:    inlineID(m),
		Media: &tg.InputMediaDocument{ID: doc.AsInput()},
	}
	req.SetMessage(caption)
	if _, err := api.MessagesEditInlineBotMessage(ctx, req); err != nil {
		return fmt.Errorf("edit guest answer into %s: %w", f.Name, err)
	}
	return nil
}

// documentMedia is an uploaded file sent as a document named name.
func documentMedia(up tg.InputFileClass, name string) *tg.InputMediaUploadedDocument {
	mt := mime.TypeByExtension(path.Ext(name))
	if mt == "" {
		mt = "application/octet-stream"
	}
	return &tg.InputMediaUploadedDocument{
		File: up, MimeType: mt, ForceFile: true,
		Attributes: []tg.DocumentAttributeClass{&tg.DocumentAttributeFilename{FileName: name}},
	}
}

func (a *API) onDC(ctx context.Context, dc int) (*tg.Client, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if dc == 0 || dc == a.homeDC || a.client == nil {
		return a.api, nil
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
