package idle

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

var errIdle = errors.New("idle")

// waitLong bounds what must happen within a limit of milliseconds, on a
// loaded machine.
const waitLong = 10 * time.Second

func cancelled(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(waitLong):
		t.Fatal("an idle stream was not cut")
	}
	if !errors.Is(context.Cause(ctx), errIdle) {
		t.Errorf("cause %v, want the idle error", context.Cause(ctx))
	}
}

func TestSilenceCuts(t *testing.T) {
	ctx, w := New(context.Background(), 50*time.Millisecond, errIdle)
	defer w.Stop()
	cancelled(t, ctx)
}

// Bytes keep the stream alive; once they stop, it is cut.
func TestBytesKeepAlive(t *testing.T) {
	limit := 500 * time.Millisecond
	ctx, w := New(context.Background(), limit, errIdle)
	defer w.Stop()
	out := w.Writer(io.Discard)
	for end := time.Now().Add(2 * limit); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if _, err := out.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if ctx.Err() != nil {
		t.Fatalf("cut while bytes moved: %v", context.Cause(ctx))
	}
	cancelled(t, ctx)
}

// The near end's own slowness, in the writer or the reader it wraps, is
// not idleness.
func TestNearEndTimeDoesNotCount(t *testing.T) {
	limit := 50 * time.Millisecond
	for name, use := range map[string]func(*Watch, func()){
		"writer": func(w *Watch, slow func()) {
			_, _ = w.Writer(writerFunc(func(p []byte) (int, error) { slow(); return len(p), nil })).Write([]byte("x"))
		},
		"reader": func(w *Watch, slow func()) {
			_, _ = w.Reader(readerFunc(func(p []byte) (int, error) { slow(); return 0, io.EOF })).Read(make([]byte, 1))
		},
	} {
		ctx, w := New(context.Background(), limit, errIdle)
		use(w, func() { time.Sleep(8 * limit) })
		if ctx.Err() != nil {
			t.Errorf("%s: cut while the near end was busy: %v", name, context.Cause(ctx))
		}
		cancelled(t, ctx)
		w.Stop()
	}
}

// Reads of the far end's bytes keep the stream alive; a read that waits
// for them does not.
func TestSource(t *testing.T) {
	limit := 500 * time.Millisecond
	ctx, w := New(context.Background(), limit, errIdle)
	defer w.Stop()
	pr, pw := io.Pipe()
	go func() {
		for end := time.Now().Add(2 * limit); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
			_, _ = pw.Write([]byte("x"))
		}
		<-ctx.Done()
		pw.CloseWithError(context.Cause(ctx))
	}()
	n, err := io.Copy(io.Discard, w.Source(pr))
	if n == 0 || !errors.Is(err, errIdle) {
		t.Errorf("copied %d, %v", n, err)
	}
	cancelled(t, ctx)
}

func TestStop(t *testing.T) {
	ctx, w := New(context.Background(), time.Hour, errIdle)
	w.Stop()
	if !errors.Is(context.Cause(ctx), context.Canceled) {
		t.Errorf("cause %v after Stop, want Canceled", context.Cause(ctx))
	}
}

func TestNoLimit(t *testing.T) {
	ctx, w := New(context.Background(), 0, errIdle)
	defer w.Stop()
	if _, err := io.Copy(io.Discard, w.Reader(strings.NewReader("x"))); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	if ctx.Err() != nil {
		t.Errorf("cut without a limit: %v", context.Cause(ctx))
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }
