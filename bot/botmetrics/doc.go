// Package botmetrics defines the bot's Prometheus metrics: the updates it
// took from Telegram, its jobs by state, its output followers, the output memory they hold, the latency
// and the errors of its Telegram calls, and the flood waits Telegram
// imposed. cmd/bot serves them on the bot's /metrics (probes.Metrics),
// beside the process's and the Go runtime's.
//
// The counters and the histogram are package variables, as the operator's
// (internal/metrics), counted from tgclient; the jobs gauge is read from
// the bot's job registry, the followers gauge from its set of
// followers, and the output memory from its budget, at each scrape.
package botmetrics
