package bot

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
)

// waitsClock records the waits asked of it and ends each at once.
type waitsClock struct {
	clock.RealClock
	waits []time.Duration
}

func (c *waitsClock) After(d time.Duration) <-chan time.Time {
	c.waits = append(c.waits, d)
	ch := make(chan time.Time, 1)
	ch <- time.Now()
	return ch
}

// TestPatienceRetry: a call that fails for want of Telegram is tried
// Steps times in all, spaced by the backoff up to its cap, which spaces
// the tries left rather than ending them; another error is not tried
// again, and the finals' calls are tried until the bot stops.
func TestPatienceRetry(t *testing.T) {
	unavailable := fmt.Errorf("send: %w", ErrUnavailable)
	s := time.Second
	cases := map[string]struct {
		backoff   wait.Backoff
		err       error
		stopAfter int // the bot stops after this many tries (0: never)
		wantTries int
		wantWaits []time.Duration
	}{
		"tries past the cap": {
			backoff: wait.Backoff{Duration: s, Factor: 2, Cap: 4 * s, Steps: 6}, err: unavailable,
			wantTries: 6, wantWaits: []time.Duration{s, 2 * s, 4 * s, 4 * s, 4 * s},
		},
		"the finals' calls until the bot stops": {
			backoff: DefaultFinalRetry, err: unavailable, stopAfter: 1000, wantTries: 1000,
			wantWaits: append([]time.Duration{s, 2 * s, 4 * s, 8 * s, 16 * s}, slices.Repeat([]time.Duration{30 * s}, 994)...),
		},
		"a refusal is not tried again": {
			backoff: DefaultFinalRetry, err: errors.New("400 MESSAGE_ID_INVALID"), wantTries: 1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			clk := &waitsClock{}
			tries := 0
			err := Patience{Backoff: tc.backoff, Clock: clk}.Retry(ctx, func() error {
				if tries++; tries == tc.stopAfter {
					cancel()
				}
				return tc.err
			})
			if !errors.Is(err, tc.err) || tries != tc.wantTries {
				t.Fatalf("Retry = %v after %d tries; want %v after %d", err, tries, tc.err, tc.wantTries)
			}
			if !slices.Equal(clk.waits, tc.wantWaits) {
				t.Errorf("waits %v, want %v", clk.waits, tc.wantWaits)
			}
		})
	}
}
