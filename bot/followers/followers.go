// Package followers runs and tracks the bot's output followers: one
// goroutine per job, keyed by the job's name, each under its own context,
// so that the bot can stop one, count them, and wait for all of them.
package followers

import (
	"context"
	"errors"
	"sync"
)

// ErrRunning is returned by Start when the key already has a follower.
var ErrRunning = errors.New("a follower of this job is running")

// Follower is one running follow function.
type Follower struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// Done returns a channel closed once the follow function returned.
func (f *Follower) Done() <-chan struct{} { return f.done }

// Stop cancels the follower's context and waits until it ended.
func (f *Follower) Stop() {
	f.cancel()
	<-f.done
}

// Set is the set of the running followers, at most one per key. The zero
// Set is empty and ready to use; a Set is safe for concurrent use.
type Set struct {
	mu      sync.Mutex
	running map[string]*Follower
}

// Start runs follow as the follower of key, under a context derived from
// ctx: cancelling ctx stops it as Stop does. It refuses with ErrRunning
// while key has a follower, and leaves that one alone: replacing it would
// take the output away from the pump that owns it, and two followers of a
// job would read its output twice. The follower leaves the set when follow
// returns, before its Done channel is closed.
func (s *Set) Start(ctx context.Context, key string, follow func(context.Context)) (*Follower, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.running[key]; ok {
		return nil, ErrRunning
	}
	if s.running == nil {
		s.running = map[string]*Follower{}
	}
	ctx, cancel := context.WithCancel(ctx)
	f := &Follower{cancel: cancel, done: make(chan struct{})}
	s.running[key] = f
	go func() {
		defer close(f.done)
		defer cancel()
		follow(ctx)
		s.mu.Lock()
		delete(s.running, key)
		s.mu.Unlock()
	}()
	return f, nil
}

// Stop stops the follower of key, if it has one, and waits until it ended.
// An owner that holds its Follower stops it with Follower.Stop instead:
// once its follower ended, the key may name another's.
func (s *Set) Stop(key string) {
	s.mu.Lock()
	f := s.running[key]
	s.mu.Unlock()
	if f != nil {
		f.Stop()
	}
}

// Len returns how many followers are running.
func (s *Set) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.running)
}

// Wait returns once it finds no follower running: those started while it
// waits are waited for too, until the set is empty.
func (s *Set) Wait() {
	for {
		s.mu.Lock()
		dones := make([]chan struct{}, 0, len(s.running))
		for _, f := range s.running {
			dones = append(dones, f.done)
		}
		s.mu.Unlock()
		if len(dones) == 0 {
			return
		}
		for _, d := range dones {
			<-d
		}
	}
}
