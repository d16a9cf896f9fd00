package tgclient

import (
	"context"
	"time"

	"github.com/gotd/td/bin"
	"github.com/gotd/td/telegram"
	"github.com/gotd/td/tg"
)

// DefaultCallTimeout bounds one attempt of a Telegram call whose context
// has no earlier deadline (Options.CallTimeout).
const DefaultCallTimeout = time.Minute

// callDeadline bounds each attempt of a call by timeout, unless its
// context ends sooner: a call that Telegram never answers fails, instead
// of holding what waits on it. It sits inside the flood waiter, so a
// flood wait is not counted in the attempt.
func callDeadline(timeout time.Duration) telegram.Middleware {
	return telegram.MiddlewareFunc(func(next tg.Invoker) telegram.InvokeFunc {
		return func(ctx context.Context, input bin.Encoder, output bin.Decoder) error {
			if d, ok := ctx.Deadline(); !ok || time.Until(d) > timeout {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			return next.Invoke(ctx, input, output)
		}
	})
}
