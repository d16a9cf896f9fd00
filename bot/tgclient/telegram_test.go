package tgclient

import (
	"context"
	"testing"

	"github.com/gotd/td/telegram"

	"shelljob.dev/shelljob/bot"
)

// A chat read back from a job's annotation may carry any kind: the calls
// that name it fail with an error rather than panic.
func TestUnknownPeerKind(t *testing.T) {
	ctx := context.Background()
	// The client never runs: each call must fail before it is made.
	a := NewAPI(telegram.NewClient(1, "hash", telegram.Options{}), 2)
	chat := bot.Chat{ID: -5, Kind: "supergroup", PeerID: 5}
	if _, err := InputPeer(chat); err == nil {
		t.Error("InputPeer: no error")
	}
	if _, err := a.Send(ctx, bot.SendRequest{Chat: chat, Text: "hi"}); err == nil {
		t.Error("Send: no error")
	}
	if err := a.Edit(ctx, bot.EditRequest{Chat: chat, ID: 1, Text: "hi"}); err == nil {
		t.Error("Edit: no error")
	}
	if err := a.Draft(ctx, bot.DraftRequest{Chat: chat, RandomID: 1, Text: "hi"}); err == nil {
		t.Error("Draft: no error")
	}
	if _, err := a.Send(ctx, bot.SendRequest{Chat: chat, File: &bot.File{Name: "a.txt", Data: []byte("a")}}); err == nil {
		t.Error("Send of a file: no error")
	}
}
