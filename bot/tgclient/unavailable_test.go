package tgclient

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/gotd/td/bin"
	"github.com/gotd/td/rpc"
	"github.com/gotd/td/tg"
	"github.com/gotd/td/tgerr"

	"shelljob.dev/shelljob/bot"
)

// failing is a Telegram whose every call fails with err.
type failing struct{ err error }

func (f failing) Invoke(context.Context, bin.Encoder, bin.Decoder) error { return f.err }

func TestMarkUnavailable(t *testing.T) {
	for _, tc := range []struct {
		name        string
		err         error
		unavailable bool
	}{
		{name: "resent until gotd gave up", err: fmt.Errorf("rpcDoRequest: %w", &rpc.RetryLimitReachedErr{Retries: 5}), unavailable: true},
		{name: "connection closed", err: fmt.Errorf("invoke: %w", rpc.ErrEngineClosed), unavailable: true},
		{name: "call deadline", err: fmt.Errorf("invoke: %w", context.DeadlineExceeded), unavailable: true},
		{name: "server error", err: tgerr.New(500, "INTERNAL"), unavailable: true},
		{name: "server timeout", err: tgerr.New(-503, "Timeout"), unavailable: true},
		{name: "refused", err: tgerr.New(400, "MESSAGE_ID_INVALID")},
		{name: "forbidden", err: tgerr.New(403, "CHAT_WRITE_FORBIDDEN")},
		{name: "flood wait", err: tgerr.New(420, "FLOOD_WAIT_30")},
		{name: "other", err: errors.New("decode: bad")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			call := markUnavailable().Handle(failing{tc.err})
			err := call.Invoke(context.Background(), &tg.HelpGetConfigRequest{}, &tg.Config{})
			if got := errors.Is(err, bot.ErrUnavailable); got != tc.unavailable {
				t.Errorf("unavailable = %v, want %v (%v)", got, tc.unavailable, err)
			}
			if !errors.Is(err, tc.err) {
				t.Errorf("error %v lost %v", err, tc.err)
			}
		})
	}

	// A call whose caller gave up is not Telegram's fault.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := markUnavailable().Handle(failing{context.DeadlineExceeded}).Invoke(ctx, &tg.HelpGetConfigRequest{}, &tg.Config{})
	if errors.Is(err, bot.ErrUnavailable) {
		t.Errorf("a cancelled caller's call = %v, want not unavailable", err)
	}
}
