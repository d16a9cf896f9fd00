package botmetrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"shelljob.dev/shelljob/bot/followers"
	"shelljob.dev/shelljob/bot/jobs"
	"shelljob.dev/shelljob/internal/liveoutput"
)

// The metrics' names, as PromQL queries them (a histogram adds _bucket,
// _sum and _count).
const (
	UpdatesName          = "shelljob_bot_updates_total"
	JobsName             = "shelljob_bot_jobs"
	FollowersName        = "shelljob_bot_followers"
	OutputMemoryName     = "shelljob_bot_output_memory_bytes"
	CallDurationName     = "shelljob_bot_telegram_call_duration_seconds"
	CallErrorsName       = "shelljob_bot_telegram_call_errors_total"
	FloodWaitsName       = "shelljob_bot_telegram_flood_waits_total"
	FloodWaitSecondsName = "shelljob_bot_telegram_flood_wait_seconds_total"
)

// Values of the kind label of Updates.
const (
	UpdateMessage    = "message"
	UpdateCallback   = "callback"
	UpdateDraftStop  = "draft_stop"
	UpdateGuestQuery = "guest_query"
	// UpdateOther is every update the bot does not act on.
	UpdateOther = "other"
)

// stateNames are the values of the state label of the jobs gauge. A job
// is Ended from the end of its command until its final and files are
// delivered, when the registry forgets it: it is being delivered.
var stateNames = map[jobs.State]string{
	jobs.Queued:   "queued",
	jobs.Running:  "running",
	jobs.Stopping: "stopping",
	jobs.Ended:    "delivering",
}

// callBuckets span a round trip to Telegram (tens of milliseconds) to an
// upload part or a difference on a slow link.
var callBuckets = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

var (
	// Updates counts the updates the bot's handler took, by kind: message
	// (one someone sent), callback (a button pressed), draft_stop,
	// guest_query, and other (those the bot ignores, its own messages
	// among them).
	Updates = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: UpdatesName,
		Help: "Updates from Telegram the bot took, by kind (message, callback, draft_stop, guest_query; other: those it ignores).",
	}, []string{"kind"})
	// CallDuration observes each Telegram call, by TL method: each
	// attempt, so a call retried after a flood wait counts once per try.
	CallDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    CallDurationName,
		Help:    "Seconds a Telegram call took, by TL method (each attempt of a call retried after a flood wait apart).",
		Buckets: callBuckets,
	}, []string{"method"})
	// CallErrors counts the failed Telegram calls, by TL method and error
	// type: Telegram's RPC error type (FLOOD_WAIT, MESSAGE_NOT_MODIFIED,
	// …), or canceled, timeout and other for the errors of the client.
	CallErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: CallErrorsName,
		Help: "Failed Telegram calls, by TL method and error type (Telegram's RPC error type, or canceled, timeout, other).",
	}, []string{"method", "type"})
	// FloodWaits counts Telegram's 420 answers (FLOOD_WAIT_N and the
	// like), by TL method.
	FloodWaits = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: FloodWaitsName,
		Help: "Flood waits (420 answers) Telegram imposed, by TL method.",
	}, []string{"method"})
	// FloodWaitSeconds adds up the waits the 420 answers asked for.
	FloodWaitSeconds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: FloodWaitSecondsName,
		Help: "Seconds of wait Telegram's flood waits asked for, by TL method.",
	}, []string{"method"})
)

func init() {
	for _, kind := range []string{UpdateMessage, UpdateCallback, UpdateDraftStop, UpdateGuestQuery, UpdateOther} {
		Updates.WithLabelValues(kind)
	}
}

// Names lists the name of every metric of this package.
func Names() []string {
	return []string{UpdatesName, JobsName, FollowersName, OutputMemoryName, CallDurationName, CallErrorsName, FloodWaitsName, FloodWaitSecondsName}
}

// Collectors are the bot's metrics, the jobs of r by state, the followers
// of f and the output memory m holds included, to register on the registry
// /metrics serves.
func Collectors(r *jobs.Registry, f *followers.Set, m *liveoutput.Budget) []prometheus.Collector {
	return []prometheus.Collector{Updates, Jobs(r), Followers(f), OutputMemory(m), CallDuration, CallErrors, FloodWaits, FloodWaitSeconds}
}

// UpdateTaken records an update of kind.
func UpdateTaken(kind string) {
	Updates.WithLabelValues(kind).Inc()
}

// jobsDesc describes the jobs gauge.
var jobsDesc = prometheus.NewDesc(JobsName,
	"Jobs the bot shows, from their command to the delivery of their final, by state (queued, running, stopping, delivering).",
	[]string{"state"}, nil)

// Jobs is the gauge of the jobs of r by state, counted at each scrape.
func Jobs(r *jobs.Registry) prometheus.Collector { return &jobsCollector{r: r} }

type jobsCollector struct{ r *jobs.Registry }

// Describe implements prometheus.Collector.
func (c *jobsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- jobsDesc }

// Collect implements prometheus.Collector.
func (c *jobsCollector) Collect(ch chan<- prometheus.Metric) {
	counts := map[jobs.State]int{}
	for _, j := range c.r.All() {
		counts[j.State()]++
	}
	for s, name := range stateNames {
		ch <- prometheus.MustNewConstMetric(jobsDesc, prometheus.GaugeValue, float64(counts[s]), name)
	}
}

// Followers is the gauge of the output followers of f that run, counted
// at each scrape.
func Followers(f *followers.Set) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: FollowersName,
		Help: "Output followers the bot runs: one per job whose output it reads.",
	}, func() float64 { return float64(f.Len()) })
}

// OutputMemory is the gauge of the output memory (Config.OutputMemory) the
// jobs hold, read at each scrape.
func OutputMemory(m *liveoutput.Budget) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: OutputMemoryName,
		Help: "Bytes of the jobs' output starts the bot holds, out of -output-memory.",
	}, func() float64 { return float64(m.Used()) })
}

// seconds is d in seconds, never below 0.
func seconds(d time.Duration) float64 {
	return max(d, 0).Seconds()
}
