package control

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// messagePoll bounds one wait of WaitMessage for an event in the chat:
// a user's delete changes the chat without an event.
const messagePoll = time.Second

// WaitEvent waits for the first event after sequence number after for
// which match is true, long-polling api. On ctx's end the error wraps
// ctx.Err() and lists the last events seen.
func WaitEvent(ctx context.Context, api API, after int, match func(Event) bool) (Event, error) {
	var seen []Event
	for {
		evs, err := api.Events(ctx, EventsQuery{After: after, Wait: pollFor(ctx, pollWait)})
		if err != nil {
			if ctx.Err() != nil {
				return Event{}, fmt.Errorf("faketg control: wait for an event: %w; last events:\n%s", ctx.Err(), summaries(seen))
			}
			return Event{}, err
		}
		for _, e := range evs.Events {
			if match(e) {
				return e, nil
			}
		}
		seen = append(seen, evs.Events...)
		if len(seen) > 20 {
			seen = seen[len(seen)-20:]
		}
		after = max(after, evs.Last)
	}
}

// WaitMessage waits until a message of chat satisfies match and returns
// it, reading the chat again after every event in it. On ctx's end the
// error wraps ctx.Err() and lists the chat's messages.
func WaitMessage(ctx context.Context, api API, chat int64, match func(Message) bool) (Message, error) {
	var last []Message
	for {
		ms, err := api.Messages(ctx, chat)
		if err == nil {
			last = ms.Messages
			for _, m := range ms.Messages {
				if match(m) {
					return m, nil
				}
			}
			_, err = api.Events(ctx, EventsQuery{After: ms.Seq, Chat: chat, Wait: pollFor(ctx, messagePoll)})
		}
		if err != nil {
			if ctx.Err() != nil {
				var b strings.Builder
				for _, m := range last {
					fmt.Fprintf(&b, "#%d from=%d edits=%d deleted=%v: %q\n", m.ID, m.From, m.Edits, m.Deleted, m.Text)
				}
				return Message{}, fmt.Errorf("faketg control: wait for a message in chat %d: %w; its messages:\n%s", chat, ctx.Err(), b.String())
			}
			return Message{}, err
		}
	}
}

// pollFor is d, or less when ctx ends sooner.
func pollFor(ctx context.Context, d time.Duration) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, max(time.Until(dl), time.Millisecond))
	}
	return d
}

func summaries(evs []Event) string {
	var b strings.Builder
	for _, e := range evs {
		b.WriteString(e.Summary)
		b.WriteByte('\n')
	}
	return b.String()
}
