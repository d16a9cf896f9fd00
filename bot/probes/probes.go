// Package probes serves the bot's health endpoints and its Prometheus
// metrics over plain HTTP, as a Deployment's probes and a scraper expect.
package probes

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Health answers /healthz while the process runs, and /readyz once Ready
// was called: the bot is connected to Telegram and gets updates.
type Health struct{ ready atomic.Bool }

// Ready marks the bot ready.
func (h *Health) Ready() { h.ready.Store(true) }

// ServeHTTP implements http.Handler.
func (h *Health) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/healthz":
		_, _ = w.Write([]byte("ok"))
	case "/readyz":
		if !h.ready.Load() {
			http.Error(w, "not connected to Telegram yet", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	default:
		http.NotFound(w, r)
	}
}

// Metrics is a handler of the process's and the Go runtime's metrics
// (process_resident_memory_bytes, go_memstats_…) and of cs, the bot's own.
func Metrics(cs ...prometheus.Collector) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector())
	reg.MustRegister(cs...)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

// Serve serves h on addr until ctx ends; an empty addr or "0" serves
// nothing. A listen error is returned at once.
func Serve(ctx context.Context, addr string, h http.Handler) error {
	if addr == "" || addr == "0" {
		return nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = l.Close()
		}
	}()
	return nil
}
