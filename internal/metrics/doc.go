// Package metrics defines the operator's Prometheus metrics: jobs started
// and finished, how long they wait for a worker and for their command to
// start, the stop signals sent, the failed agent execs, and each pool's
// ready and busy workers. They are registered once, on controller-runtime's
// registry, which the manager serves on /metrics with its own metrics.
//
// Each pool's series are labelled with the pool's name only: the operator
// watches one namespace.
package metrics
