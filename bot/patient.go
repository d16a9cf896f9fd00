package bot

import (
	"context"
	"errors"
	"math"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
)

// DefaultFinalRetry spaces the tries of a final's call that failed for
// want of Telegram: 1 s, then twice as long each time up to 30 s, for as
// long as the bot runs. A bot stopped meanwhile leaves the final to its
// next start, which sends it in its small form (recordAttempt).
var DefaultFinalRetry = wait.Backoff{Duration: time.Second, Factor: 2, Cap: 30 * time.Second, Steps: math.MaxInt32}

// Patience tries a call again while it fails for a passing reason
// (Passing; by default, for want of Telegram: ErrUnavailable), until it
// works, fails otherwise, its context ends or it was tried Backoff.Steps
// times in all, Backoff's durations apart.
type Patience struct {
	Backoff wait.Backoff
	Clock   clock.Clock
	Passing func(error) bool
}

// Retry makes call with p's patience and returns its last error.
func (p Patience) Retry(ctx context.Context, call func() error) error {
	passing := p.Passing
	if passing == nil {
		passing = func(err error) bool { return errors.Is(err, ErrUnavailable) }
	}
	// Tries are counted here: wait.Backoff sets its own steps to 0 once a
	// duration reaches its cap, and then keeps returning the cap.
	b := p.Backoff
	for tries := b.Steps; ; tries-- {
		err := call()
		if err == nil || !passing(err) || tries <= 1 || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-p.Clock.After(b.Step()):
		}
	}
}

// Patient returns a Sender whose calls are made with p's patience. A file
// streamed from a Reader is sent once, as what it read is gone: its
// caller opens it anew for each try (Patience.Retry).
func (s Sender) Patient(p Patience) Sender {
	return Sender{tg: patient{Telegram: s.tg, p: p}}
}

// patient is the Telegram of a Patient Sender.
type patient struct {
	Telegram
	p Patience
}

func (p patient) Send(ctx context.Context, r SendRequest) (id int, err error) {
	if r.File != nil && r.File.Reader != nil {
		return p.Telegram.Send(ctx, r)
	}
	err = p.p.Retry(ctx, func() (err error) {
		id, err = p.Telegram.Send(ctx, r)
		return err
	})
	return id, err
}

func (p patient) Edit(ctx context.Context, r EditRequest) error {
	return p.p.Retry(ctx, func() error { return p.Telegram.Edit(ctx, r) })
}

func (p patient) Delete(ctx context.Context, chat Chat, id int) error {
	return p.p.Retry(ctx, func() error { return p.Telegram.Delete(ctx, chat, id) })
}

func (p patient) Draft(ctx context.Context, r DraftRequest) error {
	return p.p.Retry(ctx, func() error { return p.Telegram.Draft(ctx, r) })
}

func (p patient) EditGuest(ctx context.Context, r GuestEditRequest) error {
	if r.File != nil && r.File.Reader != nil {
		return p.Telegram.EditGuest(ctx, r)
	}
	return p.p.Retry(ctx, func() error { return p.Telegram.EditGuest(ctx, r) })
}
