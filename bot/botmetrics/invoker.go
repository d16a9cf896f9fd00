package botmetrics

import (
	"context"
	"errors"
	"time"

	"github.com/gotd/td/bin"
	"github.com/gotd/td/telegram"
	"github.com/gotd/td/tg"
	"github.com/gotd/td/tgerr"
)

// floodCode is the code of Telegram's flood waits: FLOOD_WAIT_N,
// FLOOD_PREMIUM_WAIT_N, SLOWMODE_WAIT_N and the like, N the seconds to wait.
const floodCode = 420

// Invoker measures each call of next: its latency by TL method, its error,
// and a flood wait. As a gotd middleware (telegram.MiddlewareFunc) put
// after a flood-wait waiter, it sees each attempt of a retried call, and
// each flood wait.
func Invoker(next tg.Invoker) telegram.InvokeFunc {
	return func(ctx context.Context, input bin.Encoder, output bin.Decoder) error {
		start := time.Now()
		err := next.Invoke(ctx, input, output)
		callDone(methodName(input), time.Since(start), err)
		return err
	}
}

// callDone records a call of method that took d and returned err.
func callDone(method string, d time.Duration, err error) {
	CallDuration.WithLabelValues(method).Observe(seconds(d))
	if err == nil {
		return
	}
	CallErrors.WithLabelValues(method, errorType(err)).Inc()
	if rpc, ok := tgerr.As(err); ok && rpc.Code == floodCode {
		FloodWaits.WithLabelValues(method).Inc()
		FloodWaitSeconds.WithLabelValues(method).Add(float64(max(rpc.Argument, 0)))
	}
}

// methodName is the TL name of a request, such as messages.sendMessage.
func methodName(input bin.Encoder) string {
	if n, ok := input.(interface{ TypeName() string }); ok {
		return n.TypeName()
	}
	return "unknown"
}

// errorType is the error label of err: Telegram's RPC error type (without
// its argument: FLOOD_WAIT), or canceled, timeout or other for an error of
// the client's own.
func errorType(err error) string {
	if rpc, ok := tgerr.As(err); ok && rpc.Type != "" {
		return rpc.Type
	}
	switch {
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	return "other"
}
