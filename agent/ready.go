package agent

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"shelljob.dev/shelljob/internal/agentapi"
)

const (
	// readyTimeout bounds the ping behind one readiness request, below the
	// kubelet's probe timeout.
	readyTimeout = time.Second
	// readyHeaderTimeout bounds a readiness request's headers.
	readyHeaderTimeout = 5 * time.Second
)

// readyHandler answers GET agentapi.ReadyPath with 200 while a ping through
// the daemon's socket is answered, and 503 otherwise: the job server itself
// is probed, not only this HTTP server.
func (d *Daemon) readyHandler() http.Handler {
	c := NewClient(d.opts.Socket)
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+agentapi.ReadyPath, func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		defer cancel()
		if err := c.Ping(ctx); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}

// serveReady serves readyHandler on l until the returned func is called.
func (d *Daemon) serveReady(l net.Listener) (stop func()) {
	srv := &http.Server{Handler: d.readyHandler(), ReadHeaderTimeout: readyHeaderTimeout}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(l); err != http.ErrServerClosed {
			d.log.Error(err, "Readiness endpoint ended")
		}
	}()
	return func() {
		_ = srv.Close()
		<-done
	}
}
