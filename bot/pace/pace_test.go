package pace

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestInterval(t *testing.T) {
	tests := map[string]struct {
		k       Kind
		elapsed time.Duration
		want    time.Duration
	}{
		"private start": {PrivateEdits, 0, 2 * time.Second},
		"private 29s":   {PrivateEdits, 29 * time.Second, 2 * time.Second},
		"private 30s":   {PrivateEdits, 30 * time.Second, 5 * time.Second},
		"group start":   {GroupEdits, 3 * time.Second, 4 * time.Second},
		"group late":    {GroupEdits, time.Hour, 10 * time.Second},
		"draft":         {Draft, time.Hour, time.Second},
	}
	for name, tc := range tests {
		if got := Interval(tc.k, tc.elapsed); got != tc.want {
			t.Errorf("%s: Interval = %v, want %v", name, got, tc.want)
		}
	}
}

func TestRetryWait(t *testing.T) {
	tests := []struct {
		iv   time.Duration
		n    int
		want time.Duration
	}{
		{2 * time.Second, 1, 2 * time.Second},
		{time.Second, 1, time.Second},
		{500 * time.Millisecond, 1, time.Second},
		{4 * time.Second, 1, 4 * time.Second},
		{4 * time.Second, 2, 8 * time.Second},
		{4 * time.Second, 4, 32 * time.Second},
		{4 * time.Second, 5, time.Minute},
		{4 * time.Second, 50, time.Minute},
	}
	for _, tc := range tests {
		if got := RetryWait(tc.iv, tc.n); got != tc.want {
			t.Errorf("RetryWait(%v, %d) = %v, want %v", tc.iv, tc.n, got, tc.want)
		}
	}
}

// TestPacerTiersAndBackoff walks a group preview through its first minute
// with a fake clock: 4 s apart, then 10 s apart after 30 s; then failures
// double the wait up to a minute, and a success resets it.
func TestPacerTiersAndBackoff(t *testing.T) {
	start := time.Unix(1000, 0)
	c := clocktesting.NewFakePassiveClock(start)
	p := New(c, GroupEdits, start)
	var gaps []time.Duration
	prev := start
	for range 8 {
		next := p.Next()
		c.SetTime(next)
		p.Done(true)
		gaps = append(gaps, next.Sub(prev))
		prev = next
	}
	want := []time.Duration{0, 4, 4, 4, 4, 4, 4, 4}
	for i := range want {
		want[i] *= time.Second
	}
	// 7 edits at 4 s reach 28 s; from 32 s on, the pace is 10 s.
	for i := range want {
		if gaps[i] != want[i] {
			t.Fatalf("gaps = %v, want %v", gaps, want)
		}
	}
	c.SetTime(p.Next())
	p.Done(true) // at 32 s
	if got := p.Next().Sub(c.Now()); got != 10*time.Second {
		t.Fatalf("after 30 s the pace is %v, want 10s", got)
	}
	var waits []time.Duration
	for range 5 {
		c.SetTime(p.Next())
		p.Done(false)
		waits = append(waits, p.Next().Sub(c.Now()))
	}
	wantWaits := []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, time.Minute, time.Minute}
	for i := range wantWaits {
		if waits[i] != wantWaits[i] {
			t.Fatalf("backoff = %v, want %v", waits, wantWaits)
		}
	}
	c.SetTime(p.Next())
	p.Done(true)
	if got := p.Next().Sub(c.Now()); got != 10*time.Second {
		t.Fatalf("after a success the wait is %v, want 10s", got)
	}
}

func TestDraftHeartbeat(t *testing.T) {
	start := time.Unix(0, 0)
	c := clocktesting.NewFakePassiveClock(start)
	p := New(c, Draft, start)
	if !p.Heartbeat().IsZero() {
		t.Fatal("heartbeat before the first draft")
	}
	p.Done(true)
	if got := p.Heartbeat().Sub(start); got != 20*time.Second {
		t.Errorf("heartbeat after %v, want 20s", got)
	}
	if got := p.Next().Sub(start); got != time.Second {
		t.Errorf("next draft after %v, want 1s", got)
	}
}
