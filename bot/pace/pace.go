// Package pace decides when a live preview may change next: the tiered
// pace of edited previews, the pace of drafts, and the backoff after failed
// edits. Time comes from an injected clock.
package pace

import (
	"time"

	"k8s.io/utils/clock"
)

const (
	// PreviewDelay: a command that ends sooner shows no preview at all, so
	// quick commands cost one message, as before live output.
	PreviewDelay = 2 * time.Second

	// PrivateFast and PrivateSlow pace an edited preview in a private chat:
	// every 2 s, then every 5 s once the command has run SlowAfter.
	PrivateFast = 2 * time.Second
	PrivateSlow = 5 * time.Second
	// GroupFast and GroupSlow pace an edited preview in a group: every 4 s,
	// then every 10 s, about 10 edits in a group's first minute, within its
	// edit budget.
	GroupFast = 4 * time.Second
	GroupSlow = 10 * time.Second
	// SlowAfter is how long a command runs before its preview slows down.
	SlowAfter = 30 * time.Second

	// DraftInterval: drafts go out at most about once a second, the draft
	// worker's own pace.
	DraftInterval = time.Second
	// DraftHeartbeat: a draft that has not changed for this long is sent
	// again, so that clients (which drop a draft 30 s after its last
	// update) keep showing it.
	DraftHeartbeat = 20 * time.Second

	// RetryFirst is the least wait after a failed edit; the wait is the
	// preview's pace when that is longer.
	RetryFirst = time.Second
	// RetryMax caps the doubling wait after failed edits in a row, so a
	// deleted preview costs one edit a minute, not one a second.
	RetryMax = time.Minute
)

// Kind is the kind of a preview.
type Kind int

const (
	// PrivateEdits is an edited message in a private chat.
	PrivateEdits Kind = iota
	// GroupEdits is an edited message in a group (or a guest answer in one).
	GroupEdits
	// Draft is a draft in a private chat.
	Draft
)

// Interval is the pace of a preview of kind k for a command that has run
// for elapsed.
func Interval(k Kind, elapsed time.Duration) time.Duration {
	switch k {
	case PrivateEdits:
		if elapsed >= SlowAfter {
			return PrivateSlow
		}
		return PrivateFast
	case GroupEdits:
		if elapsed >= SlowAfter {
			return GroupSlow
		}
		return GroupFast
	case Draft:
		return DraftInterval
	default:
		panic("pace: unknown kind")
	}
}

// RetryWait is the wait after the n-th failed update in a row (n ≥ 1):
// RetryFirst, or the pace when longer, doubled after each further failure,
// up to RetryMax.
func RetryWait(interval time.Duration, n int) time.Duration {
	w := max(RetryFirst, interval)
	for i := 1; i < n && w < RetryMax; i++ {
		w *= 2
	}
	return min(w, RetryMax)
}

// Pacer keeps the times of one preview's updates.
type Pacer struct {
	clock    clock.PassiveClock
	kind     Kind
	start    time.Time
	last     time.Time
	failures int
	sent     bool
}

// New returns a Pacer for a preview of kind k of a command that started at
// start.
func New(c clock.PassiveClock, k Kind, start time.Time) *Pacer {
	return &Pacer{clock: c, kind: k, start: start}
}

// Kind returns the preview's kind.
func (p *Pacer) Kind() Kind { return p.kind }

// SetKind changes the kind, when a refused draft becomes an edited message.
func (p *Pacer) SetKind(k Kind) { p.kind = k }

// Next is the earliest time of the next update.
func (p *Pacer) Next() time.Time {
	if !p.sent {
		return p.start
	}
	iv := Interval(p.kind, p.last.Sub(p.start))
	if p.failures > 0 {
		iv = RetryWait(iv, p.failures)
	}
	return p.last.Add(iv)
}

// Heartbeat is when a draft must be sent again even if unchanged; the zero
// time for other kinds.
func (p *Pacer) Heartbeat() time.Time {
	if p.kind != Draft || !p.sent {
		return time.Time{}
	}
	return p.last.Add(DraftHeartbeat)
}

// Failures is the number of failed updates in a row.
func (p *Pacer) Failures() int { return p.failures }

// Done records an update attempt made now and whether it worked. A
// success starts the failure count again.
func (p *Pacer) Done(ok bool) {
	p.last = p.clock.Now()
	p.sent = true
	if ok {
		p.failures = 0
	} else {
		p.failures++
	}
}
