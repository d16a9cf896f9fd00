package streamapi

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"k8s.io/apiserver/pkg/registry/rest"

	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/deflate"
)

// response is a streamed answer: its header goes out with its first byte,
// and each write is flushed, as pods/log does with follow. Until its first
// byte, an error is a Kubernetes status; after it, the stream is cut
// (fail), so that no reader takes a broken stream for a whole one.
type response struct {
	w           http.ResponseWriter
	rc          *http.ResponseController
	contentType string
	// gzip, for a reader that accepts it, compresses the body, each write
	// on its own and readable as it comes: the stream goes through the API
	// server's proxy, decrypted and encrypted again, at a fraction of its
	// size when it is text.
	gzip *deflate.Gzip

	mu      sync.Mutex
	started bool
	// wrote is when the last write went out.
	wrote time.Time
}

func newResponse(w http.ResponseWriter, req *http.Request, contentType string) *response {
	r := &response{w: w, rc: http.NewResponseController(w), contentType: contentType}
	if acceptsGzip(req) {
		r.gzip = &deflate.Gzip{W: w}
	}
	return r
}

// acceptsGzip tells whether the request's Accept-Encoding takes gzip, as
// Go's HTTP client, and so client-go, asks unless told not to.
func acceptsGzip(req *http.Request) bool {
	for _, v := range req.Header.Values("Accept-Encoding") {
		for _, coding := range strings.Split(v, ",") {
			name, q, _ := strings.Cut(strings.TrimSpace(coding), ";")
			if strings.EqualFold(strings.TrimSpace(name), "gzip") && strings.ReplaceAll(q, " ", "") != "q=0" {
				return true
			}
		}
	}
	return false
}

// Write writes p, the header first if it has not gone out. Callers hold
// the lock (do), or are the response's only writer.
func (r *response) Write(p []byte) (int, error) {
	r.start()
	r.wrote = time.Now()
	if r.gzip == nil {
		return r.w.Write(p)
	}
	return r.gzip.Write(p)
}

// start sends the header, once.
func (r *response) start() {
	if r.started {
		return
	}
	r.started = true
	r.w.Header().Set("Content-Type", r.contentType)
	r.w.Header().Set("X-Content-Type-Options", "nosniff")
	r.w.Header().Set("Vary", "Accept-Encoding")
	if r.gzip != nil {
		r.w.Header().Set("Content-Encoding", "gzip")
	}
	r.w.WriteHeader(http.StatusOK)
}

// sent tells whether the response's header has gone out: an error is no
// longer a status.
func (r *response) sent() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.started
}

// do runs write, which writes to the response, under its lock, and
// flushes what it wrote.
func (r *response) do(write func() error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := write(); err != nil {
		return err
	}
	if !r.started {
		return nil
	}
	return r.rc.Flush()
}

// finish ends the response: with err's status if nothing went out yet,
// else by cutting the stream; a response that ends without an error sends
// its header if it has not.
func (r *response) finish(err error, responder rest.Responder) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case err == nil:
		r.start()
		if r.gzip != nil {
			// An error here is the reader's, gone: nothing to tell it.
			_ = r.gzip.Close()
		}
	case !r.started:
		responder.Error(err)
	default:
		// The server aborts the response: the reader's stream breaks
		// rather than ends.
		panic(http.ErrAbortHandler)
	}
}

// keepAlive writes frames' keepalive into the response every interval
// in which nothing else went out, until the returned stop, which waits
// for its end, so that its reader tells a silent command, or a job that
// waits to start, from a dead stream. The first goes out after the first
// interval: an error found before (a job that is not there, a worker
// gone) is still a status.
func (r *response) keepAlive(frames *agentapi.FrameWriter, interval time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	r.mu.Lock()
	r.wrote = time.Now()
	r.mu.Unlock()
	go func() {
		defer close(done)
		r.keepalives(ctx, frames, interval)
	}()
	return func() {
		cancel()
		<-done
	}
}

func (r *response) keepalives(ctx context.Context, frames *agentapi.FrameWriter, interval time.Duration) {
	t := time.NewTicker(interval / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			err := r.do(func() error {
				if ctx.Err() != nil || now.Sub(r.wrote) < interval {
					return nil
				}
				return frames.Keepalive()
			})
			if err != nil {
				return
			}
		}
	}
}
