package faketg_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/go-faster/errors"
	"github.com/gotd/td/telegram/uploader"
	"github.com/gotd/td/tg"
	"github.com/gotd/td/tgerr"

	"shelljob.dev/shelljob/internal/faketg"
)

// A guest answer becomes a document: stored with messages.uploadMedia,
// then named by editInlineBotMessage. A new upload in the edit and a
// caption over 1024 units are refused.
func TestGuestAnswerMedia(t *testing.T) {
	s := faketg.NewTest(t, faketg.Options{})
	alice := s.NewUser(faketg.UserOptions{Admin: true})
	other := s.NewChat(faketg.Group, faketg.ChatOptions{Title: "elsewhere", NoBot: true})
	data := bytes.Repeat([]byte("output line\n"), 1000)
	b := newTestBot(t)
	refusals := make(chan error, 2)
	b.d.OnBotGuestChatQuery(func(ctx context.Context, e tg.Entities, u *tg.UpdateBotGuestChatQuery) error {
		id, err := b.api.MessagesSetBotGuestChatResult(ctx, &tg.MessagesSetBotGuestChatResultRequest{
			QueryID: u.QueryID,
			Result: &tg.InputBotInlineResult{ID: "1", Type: "article",
				SendMessage: &tg.InputBotInlineMessageText{Message: "⏳ Running…"}},
		})
		if err != nil {
			return err
		}
		up, err := uploader.NewUploader(b.api).FromBytes(ctx, "output.txt", data)
		if err != nil {
			return err
		}
		doc := &tg.InputMediaUploadedDocument{File: up, MimeType: "text/plain", ForceFile: true,
			Attributes: []tg.DocumentAttributeClass{&tg.DocumentAttributeFilename{FileName: "output.txt"}}}
		edit := func(media tg.InputMediaClass, caption string) error {
			req := &tg.MessagesEditInlineBotMessageRequest{ID: id, Media: media}
			req.SetMessage(caption)
			_, err := b.api.MessagesEditInlineBotMessage(ctx, req)
			return err
		}
		refusals <- edit(doc, "new upload")
		stored, err := b.api.MessagesUploadMedia(ctx, &tg.MessagesUploadMediaRequest{Peer: &tg.InputPeerSelf{}, Media: doc})
		if err != nil {
			return err
		}
		md, ok := stored.(*tg.MessageMediaDocument)
		if !ok {
			return errors.Errorf("uploadMedia = %T", stored)
		}
		in := &tg.InputMediaDocument{ID: md.Document.(*tg.Document).AsInput()}
		refusals <- edit(in, strings.Repeat("x", 1025))
		return edit(in, "the end\n\nexit 0")
	})
	b.start(s)
	ctx := ctxT(t)

	seq := s.Seq()
	q, err := alice.Guest(ctx, other, "@shelljob_bot .a seq 1 3000")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Answer(ctx); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"MEDIA_INVALID", "MEDIA_CAPTION_TOO_LONG"} {
		if err := <-refusals; !tgerr.Is(err, want) {
			t.Errorf("edit = %v, want %s", err, want)
		}
	}
	ev, err := s.WaitEvent(ctx, seq, func(ev faketg.Event) bool { return ev.Kind == faketg.InlineEdit && ev.OK() })
	if err != nil {
		t.Fatal(err)
	}
	if ev.Media == nil || ev.Media.Filename != "output.txt" || ev.Text != "the end\n\nexit 0" {
		t.Fatalf("inline edit: %s", ev)
	}
	m, _ := s.GuestAnswer(q.ID)
	if m.Text != "the end\n\nexit 0" || m.Media == nil || !bytes.Equal(m.Media.Data, data) || m.Edits != 1 {
		t.Fatalf("guest answer: %q, media %v, %d edits", m.Text, m.Media != nil, m.Edits)
	}
	if calls := s.Log().Method("messages.uploadMedia").OK(); len(calls) != 1 || calls[0].Media == nil {
		t.Fatalf("uploadMedia calls: %v", calls)
	}
}
