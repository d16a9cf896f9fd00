package tgclient

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/gotd/td/bin"
	"github.com/gotd/td/telegram/message/markup"
	"github.com/gotd/td/tg"
	"github.com/gotd/td/tgerr"
	"github.com/gotd/td/tgmock"

	"shelljob.dev/shelljob/bot"
)

// Narrow tests of each call on gotd's mock invoker: the request that goes
// out, and what the API makes of the answer. The bot's behaviour through
// these calls is tested against the MTProto fake (bot/*_test.go).

var (
	group = bot.Chat{ID: -5, Kind: bot.PeerChat, PeerID: 5}
	forum = bot.Chat{ID: -1000000000009, Kind: bot.PeerChannel, PeerID: 9, AccessHash: 99, Topic: 3}
	// ignoreFlags: a request's flags are written when it is encoded, which
	// the mock does not do.
	ignoreFlags = cmpopts.IgnoreTypes(bin.Fields(0))
)

func testAPI(t *testing.T) (*API, *tgmock.Mock) {
	mock := tgmock.NewRequire(t)
	return newInvokerAPI(mock), mock
}

// expect adds an expected call of a request equal to want. fix, when set,
// checks and copies the fields the API makes up (random ids, uploads)
// from the request to want first.
func expect[R bin.Encoder](t *testing.T, mock *tgmock.Mock, want R, fix func(got, want R)) *tgmock.RequestBuilder {
	return mock.ExpectFunc(func(b bin.Encoder) {
		t.Helper()
		got, ok := b.(R)
		if !ok {
			t.Fatalf("request %T, want %T", b, want)
		}
		if fix != nil {
			fix(got, want)
		}
		if diff := cmp.Diff(want, got, ignoreFlags); diff != "" {
			t.Errorf("request (-want +got):\n%s", diff)
		}
	})
}

func randomID(t *testing.T) func(got, want *tg.MessagesSendMessageRequest) {
	return func(got, want *tg.MessagesSendMessageRequest) {
		if got.RandomID == 0 {
			t.Error("random_id 0")
		}
		want.RandomID = got.RandomID
	}
}

func TestSendText(t *testing.T) {
	ctx := context.Background()
	a, mock := testAPI(t)
	rows := [][]bot.Button{{{Text: "Stop", Data: "shk:1"}}}
	expect(t, mock, &tg.MessagesSendMessageRequest{
		Peer: &tg.InputPeerChat{ChatID: 5}, Message: "hi", NoWebpage: true, Silent: true,
		ReplyTo:     &tg.InputReplyToMessage{ReplyToMsgID: 7},
		ReplyMarkup: markup.InlineRow(markup.Callback("Stop", []byte("shk:1"))),
	}, randomID(t)).ThenResult(&tg.UpdateShortSentMessage{ID: 42})
	id, err := a.Send(ctx, bot.SendRequest{Chat: group, ReplyTo: 7, Silent: true, Buttons: rows, Text: "hi"})
	if err != nil || id != 42 {
		t.Fatalf("Send = %d, %v; want 42", id, err)
	}
}

// In a forum topic, a message that replies to nothing replies to the
// topic, and every reply names the topic.
func TestSendInTopic(t *testing.T) {
	ctx := context.Background()
	a, mock := testAPI(t)
	peer := &tg.InputPeerChannel{ChannelID: 9, AccessHash: 99}
	sent := func(id int) *tg.Updates {
		return &tg.Updates{Updates: []tg.UpdateClass{&tg.UpdateNewChannelMessage{Message: &tg.Message{ID: id, PeerID: &tg.PeerChannel{ChannelID: 9}}}}}
	}
	expect(t, mock, &tg.MessagesSendMessageRequest{
		Peer: peer, Message: "first", NoWebpage: true,
		ReplyTo: &tg.InputReplyToMessage{ReplyToMsgID: 3, TopMsgID: 3},
	}, randomID(t)).ThenResult(sent(10))
	expect(t, mock, &tg.MessagesSendMessageRequest{
		Peer: peer, Message: "second", NoWebpage: true,
		ReplyTo: &tg.InputReplyToMessage{ReplyToMsgID: 10, TopMsgID: 3},
	}, randomID(t)).ThenResult(sent(11))
	for _, c := range []struct {
		reply int
		text  string
		want  int
	}{{0, "first", 10}, {10, "second", 11}} {
		id, err := a.Send(ctx, bot.SendRequest{Chat: forum, ReplyTo: c.reply, Text: c.text})
		if err != nil || id != c.want {
			t.Errorf("Send(%q) = %d, %v; want %d", c.text, id, err, c.want)
		}
	}
}

// uploaded expects the one part of a small upload and returns a check
// that a request names it.
func uploaded(t *testing.T, mock *tgmock.Mock, data string) func(tg.InputFileClass) {
	var fileID int64
	mock.ExpectFunc(func(b bin.Encoder) {
		p, ok := b.(*tg.UploadSaveFilePartRequest)
		if !ok || string(p.Bytes) != data || p.FilePart != 0 {
			t.Fatalf("upload: %#v", b)
		}
		fileID = p.FileID
	}).ThenTrue()
	return func(f tg.InputFileClass) {
		t.Helper()
		if in, ok := f.(*tg.InputFile); !ok || in.ID != fileID || in.Parts != 1 {
			t.Errorf("file %#v, want the upload %d", f, fileID)
		}
	}
}

// A file goes as a document named by its file name, with its MIME type,
// or as a photo; either way as a reply.
func TestSendFile(t *testing.T) {
	ctx := context.Background()
	a, mock := testAPI(t)
	isUpload := uploaded(t, mock, "made\n")
	expect(t, mock, &tg.MessagesSendMediaRequest{
		Peer: &tg.InputPeerChat{ChatID: 5}, ReplyTo: &tg.InputReplyToMessage{ReplyToMsgID: 7},
		Media: &tg.InputMediaUploadedDocument{
			MimeType: "text/plain; charset=utf-8", ForceFile: true,
			Attributes: []tg.DocumentAttributeClass{&tg.DocumentAttributeFilename{FileName: "out.txt"}},
		},
	}, func(got, want *tg.MessagesSendMediaRequest) {
		doc := got.Media.(*tg.InputMediaUploadedDocument)
		isUpload(doc.File)
		want.RandomID, want.Media.(*tg.InputMediaUploadedDocument).File = got.RandomID, doc.File
	}).ThenResult(&tg.Updates{Updates: []tg.UpdateClass{&tg.UpdateNewMessage{Message: &tg.Message{ID: 43, PeerID: &tg.PeerChat{ChatID: 5}}}}})
	id, err := a.Send(ctx, bot.SendRequest{Chat: group, ReplyTo: 7, File: &bot.File{Name: "out.txt", Data: []byte("made\n")}})
	if err != nil || id != 43 {
		t.Fatalf("Send(out.txt) = %d, %v; want 43", id, err)
	}

	isUpload = uploaded(t, mock, "PNG")
	expect(t, mock, &tg.MessagesSendMediaRequest{
		Peer: &tg.InputPeerChat{ChatID: 5}, Media: &tg.InputMediaUploadedPhoto{},
	}, func(got, want *tg.MessagesSendMediaRequest) {
		photo := got.Media.(*tg.InputMediaUploadedPhoto)
		isUpload(photo.File)
		want.RandomID, want.Media.(*tg.InputMediaUploadedPhoto).File = got.RandomID, photo.File
	}).ThenResult(&tg.UpdateShortSentMessage{ID: 44})
	id, err = a.Send(ctx, bot.SendRequest{Chat: group, File: &bot.File{Name: "pic.png", Data: []byte("PNG"), Photo: true}})
	if err != nil || id != 44 {
		t.Fatalf("Send(pic.png) = %d, %v; want 44", id, err)
	}
}

// An edit without buttons removes them; one that changes nothing is done.
func TestEdit(t *testing.T) {
	ctx := context.Background()
	a, mock := testAPI(t)
	expect(t, mock, &tg.MessagesEditMessageRequest{Peer: &tg.InputPeerChat{ChatID: 5}, ID: 8, Message: "final", NoWebpage: true}, nil).
		ThenRPCErr(tgerr.New(400, "MESSAGE_NOT_MODIFIED"))
	if err := a.Edit(ctx, bot.EditRequest{Chat: group, ID: 8, Text: "final"}); err != nil {
		t.Errorf("an edit that changes nothing: %v", err)
	}
	expect(t, mock, &tg.MessagesEditMessageRequest{Peer: &tg.InputPeerChat{ChatID: 5}, ID: 8, Message: "gone", NoWebpage: true}, nil).
		ThenRPCErr(tgerr.New(400, "MESSAGE_ID_INVALID"))
	if err := a.Edit(ctx, bot.EditRequest{Chat: group, ID: 8, Text: "gone"}); !tgerr.Is(err, "MESSAGE_ID_INVALID") {
		t.Errorf("an edit of a deleted message: %v", err)
	}
}

// A message goes for everyone: by id in a group, through its channel in a
// supergroup.
func TestDelete(t *testing.T) {
	ctx := context.Background()
	a, mock := testAPI(t)
	expect(t, mock, &tg.MessagesDeleteMessagesRequest{Revoke: true, ID: []int{8}}, nil).
		ThenResult(&tg.MessagesAffectedMessages{Pts: 2, PtsCount: 1})
	expect(t, mock, &tg.ChannelsDeleteMessagesRequest{Channel: &tg.InputChannel{ChannelID: 9, AccessHash: 99}, ID: []int{12}}, nil).
		ThenResult(&tg.MessagesAffectedMessages{Pts: 5, PtsCount: 1})
	if err := a.Delete(ctx, group, 8); err != nil {
		t.Error(err)
	}
	if err := a.Delete(ctx, forum, 12); err != nil {
		t.Error(err)
	}
}

func TestDraft(t *testing.T) {
	ctx := context.Background()
	a, mock := testAPI(t)
	expect(t, mock, &tg.MessagesSetTypingRequest{
		Peer: &tg.InputPeerChannel{ChannelID: 9, AccessHash: 99}, TopMsgID: 3,
		Action: &tg.SendMessageTextDraftAction{CanStop: true, RandomID: 77, Text: tg.TextWithEntities{Text: "⏳ 1", Entities: []tg.MessageEntityClass{}}},
	}, nil).ThenTrue()
	if err := a.Draft(ctx, bot.DraftRequest{Chat: forum, RandomID: 77, Text: "⏳ 1"}); err != nil {
		t.Error(err)
	}
}

func TestAnswerCallback(t *testing.T) {
	a, mock := testAPI(t)
	expect(t, mock, &tg.MessagesSetBotCallbackAnswerRequest{QueryID: 4, Message: "Stopping"}, nil).ThenTrue()
	if err := a.AnswerCallback(context.Background(), 4, "Stopping"); err != nil {
		t.Error(err)
	}
}

// A guest answer is posted as an article and edited where it is held; a
// file goes in as a stored document under its caption.
func TestGuestAnswer(t *testing.T) {
	ctx := context.Background()
	a, mock := testAPI(t)
	held := &tg.InputBotInlineMessageID64{DCID: 2, OwnerID: 6, ID: 1, AccessHash: 7919}
	expect(t, mock, &tg.MessagesSetBotGuestChatResultRequest{QueryID: 4, Result: &tg.InputBotInlineResult{
		ID: "1", Type: "article", Title: "shell",
		SendMessage: &tg.InputBotInlineMessageText{Message: "⏳ running", NoWebpage: true},
	}}, nil).ThenResult(held)
	m, err := a.AnswerGuest(ctx, 4, "⏳ running")
	if want := (bot.GuestMessage{DC: 2, OwnerID: 6, ID: 1, AccessHash: 7919}); err != nil || m != want {
		t.Fatalf("AnswerGuest = %+v, %v; want %+v", m, err, want)
	}

	expect(t, mock, &tg.MessagesEditInlineBotMessageRequest{ID: held, Message: "1\n2", NoWebpage: true}, nil).
		ThenRPCErr(tgerr.New(400, "MESSAGE_NOT_MODIFIED"))
	if err := a.EditGuest(ctx, bot.GuestEditRequest{Message: m, Text: "1\n2"}); err != nil {
		t.Errorf("an edit that changes nothing: %v", err)
	}

	isUpload := uploaded(t, mock, "long\n")
	doc := &tg.Document{ID: 5000001, AccessHash: 31, FileReference: []byte{1}, MimeType: "text/plain; charset=utf-8", DCID: 2, Attributes: []tg.DocumentAttributeClass{}}
	expect(t, mock, &tg.MessagesUploadMediaRequest{Peer: &tg.InputPeerSelf{}, Media: &tg.InputMediaUploadedDocument{
		MimeType: "text/plain; charset=utf-8", ForceFile: true,
		Attributes: []tg.DocumentAttributeClass{&tg.DocumentAttributeFilename{FileName: "output.txt"}},
	}}, func(got, want *tg.MessagesUploadMediaRequest) {
		up := got.Media.(*tg.InputMediaUploadedDocument)
		isUpload(up.File)
		want.Media.(*tg.InputMediaUploadedDocument).File = up.File
	}).ThenResult(&tg.MessageMediaDocument{Document: doc})
	expect(t, mock, &tg.MessagesEditInlineBotMessageRequest{
		ID: held, Message: "caption", Media: &tg.InputMediaDocument{ID: doc.AsInput()},
	}, nil).ThenTrue()
	if err := a.EditGuest(ctx, bot.GuestEditRequest{Message: m, Text: "caption", File: &bot.File{Name: "output.txt", Data: []byte("long\n")}}); err != nil {
		t.Error(err)
	}
}
