package tgclient

import (
	"context"
	"errors"
	"fmt"

	"github.com/gotd/td/bin"
	"github.com/gotd/td/rpc"
	"github.com/gotd/td/telegram"
	"github.com/gotd/td/tg"
	"github.com/gotd/td/tgerr"

	"shelljob.dev/shelljob/bot"
)

// markUnavailable wraps the errors of calls that failed for want of
// Telegram in bot.ErrUnavailable, so that the bot can tell a call worth
// trying again from one Telegram refused. It sits outside the call
// deadline, whose timeout is one such failure.
func markUnavailable() telegram.Middleware {
	return telegram.MiddlewareFunc(func(next tg.Invoker) telegram.InvokeFunc {
		return func(ctx context.Context, input bin.Encoder, output bin.Decoder) error {
			err := next.Invoke(ctx, input, output)
			if err != nil && ctx.Err() == nil && unavailable(err) {
				return fmt.Errorf("%w: %w", bot.ErrUnavailable, err)
			}
			return err
		}
	})
}

// unavailable tells whether err, from a call whose own context is still
// live, means that Telegram did not take the call in: gotd gave up
// resending it unacknowledged, its connection closed under it, the
// attempt's deadline passed, or the server failed (5xx, or -503 Timeout).
// A refusal (4xx) and a flood wait past the waiter's patience are not.
func unavailable(err error) bool {
	var limit *rpc.RetryLimitReachedErr
	if errors.As(err, &limit) || errors.Is(err, rpc.ErrEngineClosed) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	if rpcErr, ok := tgerr.As(err); ok {
		return rpcErr.Code >= 500 || rpcErr.Code == -503
	}
	return false
}
