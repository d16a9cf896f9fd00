package followers_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"shelljob.dev/shelljob/bot/followers"
)

// timeout bounds every wait of the tests: a follower that should have
// ended by then never will.
const timeout = 5 * time.Second

// untilCanceled is a follow function that runs until its context ends and
// sends its context's error to errs.
func untilCanceled(errs chan<- error) func(context.Context) {
	return func(ctx context.Context) {
		<-ctx.Done()
		errs <- ctx.Err()
	}
}

func start(t *testing.T, s *followers.Set, ctx context.Context, key string, follow func(context.Context)) *followers.Follower {
	t.Helper()
	f, err := s.Start(ctx, key, follow)
	if err != nil {
		t.Fatalf("Start(%q): %v", key, err)
	}
	return f
}

func ended(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(timeout):
		t.Fatalf("%s: the follower did not end", what)
	}
}

func running(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
		t.Fatalf("%s: the follower ended", what)
	default:
	}
}

func wantLen(t *testing.T, s *followers.Set, want int) {
	t.Helper()
	if got := s.Len(); got != want {
		t.Fatalf("Len() = %d, want %d", got, want)
	}
}

func TestStartStop(t *testing.T) {
	var s followers.Set
	wantLen(t, &s, 0)
	errs := make(chan error, 1)
	f := start(t, &s, context.Background(), "job-a", untilCanceled(errs))
	wantLen(t, &s, 1)
	running(t, f.Done(), "after Start")

	f.Stop()
	// Stop returns once the follower ended: its Done is closed and it left
	// the set, with no wait.
	select {
	case <-f.Done():
	default:
		t.Fatal("Stop returned before the follower ended")
	}
	wantLen(t, &s, 0)
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Errorf("the follower's context ended with %v, want %v", err, context.Canceled)
	}
	f.Stop() // stopping an ended follower is a no-op
}

func TestStopByKey(t *testing.T) {
	var s followers.Set
	errs := make(chan error, 2)
	a := start(t, &s, context.Background(), "job-a", untilCanceled(errs))
	b := start(t, &s, context.Background(), "job-b", untilCanceled(errs))
	wantLen(t, &s, 2)

	s.Stop("job-a")
	ended(t, a.Done(), "job-a")
	running(t, b.Done(), "job-b after Stop(job-a)")
	wantLen(t, &s, 1)
	s.Stop("job-a")   // no follower any more
	s.Stop("unknown") // never had one
	wantLen(t, &s, 1)

	s.Stop("job-b")
	ended(t, b.Done(), "job-b")
	wantLen(t, &s, 0)
}

// TestReturns: a follower whose function returns by itself leaves the set,
// before its Done is closed, and its key takes a new follower.
func TestReturns(t *testing.T) {
	var s followers.Set
	release := make(chan struct{})
	f := start(t, &s, context.Background(), "job-a", func(context.Context) { <-release })
	wantLen(t, &s, 1)
	close(release)
	ended(t, f.Done(), "returned")
	wantLen(t, &s, 0)

	again := start(t, &s, context.Background(), "job-a", func(context.Context) {})
	ended(t, again.Done(), "second follower of job-a")
}

// TestSecondStart: a second follower of a running key is refused and never
// runs; the first goes on, untouched.
func TestSecondStart(t *testing.T) {
	var s followers.Set
	errs := make(chan error, 1)
	first := start(t, &s, context.Background(), "job-a", untilCanceled(errs))

	ran := make(chan struct{})
	second, err := s.Start(context.Background(), "job-a", func(context.Context) { close(ran) })
	if !errors.Is(err, followers.ErrRunning) {
		t.Fatalf("second Start: err = %v, want %v", err, followers.ErrRunning)
	}
	if second != nil {
		t.Error("second Start returned a follower")
	}
	wantLen(t, &s, 1)
	running(t, first.Done(), "first after the second Start")

	other := start(t, &s, context.Background(), "job-b", func(context.Context) {})
	ended(t, other.Done(), "job-b")

	first.Stop()
	wantLen(t, &s, 0)
	select {
	case <-ran:
		t.Error("the refused follower ran")
	default:
	}
}

// TestParentCanceled: cancelling the context a follower was started under
// stops it, and it alone.
func TestParentCanceled(t *testing.T) {
	var s followers.Set
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	errs := make(chan error, 2)
	a := start(t, &s, parent, "job-a", untilCanceled(errs))
	b := start(t, &s, parent, "job-b", untilCanceled(errs))
	other := start(t, &s, context.Background(), "job-c", untilCanceled(errs))

	cancel()
	ended(t, a.Done(), "job-a")
	ended(t, b.Done(), "job-b")
	for range 2 {
		if err := <-errs; !errors.Is(err, context.Canceled) {
			t.Errorf("a follower's context ended with %v, want %v", err, context.Canceled)
		}
	}
	running(t, other.Done(), "job-c, under another context")
	wantLen(t, &s, 1)
	other.Stop()
	wantLen(t, &s, 0)
}

func TestWait(t *testing.T) {
	var s followers.Set
	s.Wait() // an empty set: returns at once

	release := make(chan struct{})
	var fs []*followers.Follower
	for i := range 3 {
		fs = append(fs, start(t, &s, context.Background(), fmt.Sprintf("job-%d", i), func(context.Context) { <-release }))
	}
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		s.Wait()
	}()
	select {
	case <-waited:
		t.Fatal("Wait returned while followers run")
	case <-time.After(50 * time.Millisecond):
	}

	// A follower started while Wait waits is waited for too.
	late := make(chan struct{})
	lateF := start(t, &s, context.Background(), "job-late", func(context.Context) { <-late })
	close(release)
	for _, f := range fs {
		ended(t, f.Done(), "released")
	}
	select {
	case <-waited:
		t.Fatal("Wait returned while a follower started during it runs")
	case <-time.After(50 * time.Millisecond):
	}
	close(late)
	ended(t, lateF.Done(), "job-late")
	ended(t, waited, "Wait")
	wantLen(t, &s, 0)
}

// TestConcurrent starts, stops, counts and waits from many goroutines, for
// the race detector, and leaves no follower behind.
func TestConcurrent(t *testing.T) {
	var s followers.Set
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for i := range 16 {
		key := fmt.Sprintf("job-%d", i%4)
		wg.Go(func() {
			for range 50 {
				f, err := s.Start(ctx, key, func(ctx context.Context) { <-ctx.Done() })
				switch {
				case errors.Is(err, followers.ErrRunning):
					s.Stop(key)
				case err != nil:
					t.Errorf("Start(%q): %v", key, err)
				default:
					_ = s.Len()
					f.Stop()
				}
			}
		})
	}
	wg.Go(s.Wait)
	wg.Wait()
	wantLen(t, &s, 0)
	s.Wait()
}
