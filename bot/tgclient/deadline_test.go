package tgclient

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gotd/td/bin"
	"github.com/gotd/td/tg"
)

// hung is a Telegram that never answers: it reports the deadline it was
// given and waits for the end of the call's context.
type hung struct{ deadline chan time.Duration }

func (h hung) Invoke(ctx context.Context, _ bin.Encoder, _ bin.Decoder) error {
	d, ok := ctx.Deadline()
	if !ok {
		h.deadline <- -1
	} else {
		h.deadline <- time.Until(d)
	}
	<-ctx.Done()
	return ctx.Err()
}

func TestCallDeadline(t *testing.T) {
	h := hung{deadline: make(chan time.Duration, 1)}
	call := callDeadline(200 * time.Millisecond).Handle(h)

	// A call without a deadline gets one, and fails once it passes.
	err := call.Invoke(context.Background(), &tg.HelpGetConfigRequest{}, &tg.Config{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("unanswered call = %v, want deadline exceeded", err)
	}
	if d := <-h.deadline; d <= 0 || d > 200*time.Millisecond {
		t.Errorf("deadline in %v, want within 200ms", d)
	}

	// An earlier deadline of the caller's stays.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_ = call.Invoke(ctx, &tg.HelpGetConfigRequest{}, &tg.Config{})
	if d := <-h.deadline; d > 50*time.Millisecond {
		t.Errorf("deadline in %v, want the caller's 50ms", d)
	}
}
