package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The metrics' names, as PromQL queries them (a histogram adds _bucket,
// _sum and _count).
const (
	JobsStartedName     = "shelljob_jobs_started_total"
	JobsFinishedName    = "shelljob_jobs_finished_total"
	QueueWaitName       = "shelljob_job_queue_wait_seconds"
	StartLatencyName    = "shelljob_job_start_latency_seconds"
	StopSignalsName     = "shelljob_stop_signals_total"
	AgentExecErrorsName = "shelljob_agent_exec_errors_total"
	PoolWorkersName     = "shelljob_pool_workers"
	EventsDroppedName   = "shelljob_events_dropped_total"
)

// Values of the state label of PoolWorkers.
const (
	WorkersReady = "ready"
	WorkersBusy  = "busy"
)

// latencyBuckets span an exec's round trip (tens of milliseconds) to a
// job that waits minutes for a busy pool.
var latencyBuckets = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800}

var (
	// JobsStarted counts the commands started, by pool.
	JobsStarted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: JobsStartedName,
		Help: "Commands of ShellJobs started on a worker, by pool.",
	}, []string{"pool"})
	// JobsFinished counts the jobs that ended, by pool, phase (Succeeded,
	// Failed, Stopped) and the reason of their Finished condition.
	JobsFinished = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: JobsFinishedName,
		Help: "ShellJobs that ended, by pool, final phase and the reason of their Finished condition.",
	}, []string{"pool", "phase", "reason"})
	// QueueWait observes the time from a job's creation to its placement
	// on a worker, by pool.
	QueueWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    QueueWaitName,
		Help:    "Seconds from a ShellJob's creation to its placement on a worker, by pool.",
		Buckets: latencyBuckets,
	}, []string{"pool"})
	// StartLatency observes the time from a job's placement to the start
	// of its command, by pool.
	StartLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    StartLatencyName,
		Help:    "Seconds from a ShellJob's placement on a worker to the start of its command, by pool.",
		Buckets: latencyBuckets,
	}, []string{"pool"})
	// StopSignals counts the signals of the stop ladder that reached a
	// job's process group, by pool and signal (SIGINT, SIGTERM, SIGKILL).
	StopSignals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: StopSignalsName,
		Help: "Signals sent to stop ShellJobs, by pool and signal.",
	}, []string{"pool", "signal"})
	// AgentExecErrors counts the agent calls that failed, by the agent's
	// subcommand (start, signal, events, …).
	AgentExecErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: AgentExecErrorsName,
		Help: "Failed execs of the agent in worker pods, by subcommand.",
	}, []string{"subcommand"})
	// PoolWorkers is each pool's workers of its current revision that are
	// ready, and those that hold a job, as the pool's status counts them.
	PoolWorkers = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: PoolWorkersName,
		Help: "Workers of a ShellPool's current revision, by pool and state (ready, busy).",
	}, []string{"pool", "state"})
	// EventsDropped counts the Events the operator did not record, past
	// its rate of Events (internal/eventlimit), by type.
	EventsDropped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: EventsDroppedName,
		Help: "Events the operator dropped past its rate of Events, by type (Normal, Warning).",
	}, []string{"type"})
)

func init() {
	crmetrics.Registry.MustRegister(JobsStarted, JobsFinished, QueueWait, StartLatency, StopSignals, AgentExecErrors, PoolWorkers, EventsDropped)
}

// Names lists the name of every metric of this package.
func Names() []string {
	return []string{JobsStartedName, JobsFinishedName, QueueWaitName, StartLatencyName, StopSignalsName, AgentExecErrorsName, PoolWorkersName, EventsDroppedName}
}

// Histograms lists the names of the histograms among Names.
func Histograms() []string {
	return []string{QueueWaitName, StartLatencyName}
}

// JobPlaced records a job of pool placed on a worker wait after its
// creation.
func JobPlaced(pool string, wait time.Duration) {
	QueueWait.WithLabelValues(pool).Observe(seconds(wait))
}

// JobStarted records a job of pool whose command started latency after its
// placement.
func JobStarted(pool string, latency time.Duration) {
	JobsStarted.WithLabelValues(pool).Inc()
	StartLatency.WithLabelValues(pool).Observe(seconds(latency))
}

// JobFinished records a job of pool that ended in phase, for reason.
func JobFinished(pool, phase, reason string) {
	JobsFinished.WithLabelValues(pool, phase, reason).Inc()
}

// SignalSent records a stop signal sent to a job of pool.
func SignalSent(pool, signal string) {
	StopSignals.WithLabelValues(pool, signal).Inc()
}

// ExecFailed records a failed exec of the agent's subcommand.
func ExecFailed(subcommand string) {
	AgentExecErrors.WithLabelValues(subcommand).Inc()
}

// SetPoolWorkers sets the ready and busy workers of pool.
func SetPoolWorkers(pool string, ready, busy int32) {
	PoolWorkers.WithLabelValues(pool, WorkersReady).Set(float64(ready))
	PoolWorkers.WithLabelValues(pool, WorkersBusy).Set(float64(busy))
}

// ForgetPool drops the series of a deleted pool's workers.
func ForgetPool(pool string) {
	PoolWorkers.DeletePartialMatch(prometheus.Labels{"pool": pool})
}

// seconds is d in seconds, never below 0: the two ends of a wait may come
// from different clocks.
func seconds(d time.Duration) float64 {
	return max(d, 0).Seconds()
}
