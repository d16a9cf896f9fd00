// Package eventlimit bounds the Events a controller records.
//
// client-go's events broadcaster (k8s.io/client-go/tools/events) hands
// each Event to a goroutine of its own, which waits for the API server,
// and keeps a copy of every Event it recorded for six to twelve minutes,
// to count repeats into a series. A burst of thousands of ShellJobs, each
// with its Queued, Scheduled, Started and Finished Events, held tens of
// thousands of them in the operator's memory for minutes. A Recorder in
// front of it lets Events through at a steady rate, with a burst, and
// drops the rest, counted: Events are best-effort in Kubernetes, and each
// job's status keeps what it tells. Normal and Warning Events have a
// budget each, so that a burst of jobs' routine Events cannot crowd out a
// failing worker's.
package eventlimit

import (
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// Options of a Recorder.
type Options struct {
	// PerSecond is the steady rate of Events of one type let through;
	// Burst how many may go at once. Default to DefaultPerSecond and
	// DefaultBurst.
	PerSecond float64
	Burst     int
	// Dropped, when set, counts the Events dropped, by type (Normal,
	// Warning).
	Dropped *prometheus.CounterVec
}

// The defaults: at this rate of one type the broadcaster keeps 1,800
// Events in memory (six minutes' worth), 3,600 at worst (twelve), at
// about 2 KiB each. At 20 a second, the memory bench's burst of 10,000
// jobs held 14 MB of them, and the operator's peak through it was +100.7
// MiB above its rest, against +79.0 at this rate (BENCHMARKS.md). A burst
// of 200 covers the four Events of each of 50 jobs started at once, and
// the steady rate those of more than one new job a second.
const (
	DefaultPerSecond = 5
	DefaultBurst     = 200
)

// Recorder is an events.EventRecorder that lets the Events of the one it
// wraps through at most at a rate for each type.
type Recorder struct {
	rec             events.EventRecorder
	normal, warning *rate.Limiter
	dropped         *prometheus.CounterVec
}

var _ events.EventRecorder = (*Recorder)(nil)

// New returns a Recorder in front of rec.
func New(rec events.EventRecorder, opts Options) *Recorder {
	if opts.PerSecond <= 0 {
		opts.PerSecond = DefaultPerSecond
	}
	if opts.Burst <= 0 {
		opts.Burst = DefaultBurst
	}
	return &Recorder{
		rec:     rec,
		normal:  rate.NewLimiter(rate.Limit(opts.PerSecond), opts.Burst),
		warning: rate.NewLimiter(rate.Limit(opts.PerSecond), opts.Burst),
		dropped: opts.Dropped,
	}
}

// Eventf records the Event when its type's rate allows it, and drops it
// otherwise; an Event of neither type is the Normal ones' to spend.
func (r *Recorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	limiter := r.normal
	if eventtype == corev1.EventTypeWarning {
		limiter = r.warning
	}
	if !limiter.Allow() {
		if r.dropped != nil {
			r.dropped.WithLabelValues(eventtype).Inc()
		}
		return
	}
	r.rec.Eventf(regarding, related, eventtype, reason, action, note, args...)
}
