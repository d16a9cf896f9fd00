// Package idle cuts a stream that moves no byte for too long while it
// waits on its far end: a hung peer or a stalled connection, which no
// read or write would ever return from.
package idle

import (
	"context"
	"io"
	"sync"
	"time"
)

// Watch is a stream's idle deadline. It cancels its context, with its
// cause, once the stream moved no byte for its limit while it waited on
// its far end. The time the near end takes, in the Write that takes the
// far end's bytes or the Read that makes the bytes it sends, does not
// count: a slow consumer or producer here is not a hung stream there.
type Watch struct {
	limit  time.Duration
	cause  error
	cancel context.CancelCauseFunc

	mu    sync.Mutex
	timer *time.Timer
	// busy counts the calls of the near end under way.
	busy  int
	last  time.Time
	armed bool
	done  bool
}

// New returns a context that the Watch cancels with cause once the stream
// is idle for limit, and the Watch. A limit of 0 or less watches nothing.
// Stop the Watch when the stream ends.
func New(ctx context.Context, limit time.Duration, cause error) (context.Context, *Watch) {
	ctx, cancel := context.WithCancelCause(ctx)
	w := &Watch{limit: limit, cause: cause, cancel: cancel, last: time.Now()}
	if limit > 0 {
		w.armed = true
		w.timer = time.AfterFunc(limit, w.check)
	}
	return ctx, w
}

// check runs when the limit may have passed since the last byte.
func (w *Watch) check() {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch left := w.limit - time.Since(w.last); {
	case w.done:
	case w.busy > 0:
		w.armed = false // leave arms it again
	case left > 0:
		w.timer.Reset(left)
	default:
		w.done = true
		w.cancel(w.cause)
	}
}

func (w *Watch) enter() {
	w.mu.Lock()
	w.busy++
	w.mu.Unlock()
}

func (w *Watch) leave() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.busy--
	w.last = time.Now()
	if w.busy == 0 && !w.armed && !w.done && w.timer != nil {
		w.armed = true
		w.timer.Reset(w.limit)
	}
}

// Stop ends the watch and cancels its context.
func (w *Watch) Stop() {
	w.mu.Lock()
	w.done = true
	if w.timer != nil {
		w.timer.Stop()
	}
	w.mu.Unlock()
	w.cancel(nil)
}

// Near runs f, work of the near end, such as handing on what the far end
// sent: the time it takes does not count.
func (w *Watch) Near(f func() error) error {
	if w == nil {
		return f()
	}
	w.enter()
	defer w.leave()
	return f()
}

// Writer is dst, into which the far end's bytes are written: each write
// is a byte moved, and the time dst takes does not count. A nil Watch
// returns dst.
func (w *Watch) Writer(dst io.Writer) io.Writer {
	if w == nil {
		return dst
	}
	return writer{w, dst}
}

// Reader is src, from which the bytes for the far end are read: each read
// is a byte moved, and the time src takes does not count. A nil Watch
// returns src.
func (w *Watch) Reader(src io.Reader) io.Reader {
	if w == nil {
		return src
	}
	return reader{w, src}
}

// Source is src, from which the far end's bytes are read: each read that
// returns some is a byte moved, and the time it waits does count. A nil
// Watch returns src.
func (w *Watch) Source(src io.Reader) io.Reader {
	if w == nil {
		return src
	}
	return source{w, src}
}

type source struct {
	w   *Watch
	src io.Reader
}

func (x source) Read(p []byte) (int, error) {
	n, err := x.src.Read(p)
	if n > 0 {
		x.w.moved()
	}
	return n, err
}

// moved records a byte moved.
func (w *Watch) moved() {
	w.mu.Lock()
	w.last = time.Now()
	w.mu.Unlock()
}

type writer struct {
	w   *Watch
	dst io.Writer
}

func (x writer) Write(p []byte) (int, error) {
	x.w.enter()
	defer x.w.leave()
	return x.dst.Write(p)
}

type reader struct {
	w   *Watch
	src io.Reader
}

func (x reader) Read(p []byte) (int, error) {
	x.w.enter()
	defer x.w.leave()
	return x.src.Read(p)
}
