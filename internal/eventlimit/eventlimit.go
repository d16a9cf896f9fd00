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
// job's status keeps what it tells.
package eventlimit

import (
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// Options of a Recorder.
type Options struct {
	// PerSecond is the steady rate of Events let through; Burst how many
	// may go at once. Default to DefaultPerSecond and DefaultBurst.
	PerSecond float64
	Burst     int
	// Dropped, when set, counts the Events dropped, by type (Normal,
	// Warning).
	Dropped *prometheus.CounterVec
}

// The defaults: at this rate the broadcaster keeps 7,200 Events in memory
// (six minutes' worth), 14,400 at worst (twelve), at about 2 KiB each: the
// memory bench's burst of 10,000 jobs saw 14 MB of them (BENCHMARKS.md).
// A burst of 500 covers a few hundred jobs started at once.
const (
	DefaultPerSecond = 20
	DefaultBurst     = 500
)

// Recorder is an events.EventRecorder that lets the Events of the one it
// wraps through at most at a rate.
type Recorder struct {
	rec     events.EventRecorder
	limiter *rate.Limiter
	dropped *prometheus.CounterVec
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
	return &Recorder{rec: rec, limiter: rate.NewLimiter(rate.Limit(opts.PerSecond), opts.Burst), dropped: opts.Dropped}
}

// Eventf records the Event when the rate allows it, and drops it
// otherwise.
func (r *Recorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	if !r.limiter.Allow() {
		if r.dropped != nil {
			r.dropped.WithLabelValues(eventtype).Inc()
		}
		return
	}
	r.rec.Eventf(regarding, related, eventtype, reason, action, note, args...)
}
