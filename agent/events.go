package agent

import (
	"context"
	"errors"
	"slices"
	"time"

	"shelljob.dev/shelljob/internal/agentapi"
)

// errLagged ends an events stream that fell subscriberBuffer events behind.
var errLagged = errors.New("events stream lagged too far behind; reconnect")

type subscriber struct{ ch chan agentapi.Event }

// broadcastLocked hands e to every events stream; the caller holds d.mu.
// A stream that cannot take it is cut rather than waited for.
func (d *Daemon) broadcastLocked(e agentapi.Event) {
	for s := range d.subs {
		select {
		case s.ch <- e:
		default:
			close(s.ch)
			delete(d.subs, s)
		}
	}
}

// subscribe returns the state of every job, and a subscriber that gets
// every event after it.
func (d *Daemon) subscribe() ([]agentapi.Event, *subscriber) {
	d.mu.Lock()
	defer d.mu.Unlock()
	jobs := make([]*job, 0, len(d.jobs))
	for _, j := range d.jobs {
		jobs = append(jobs, j)
	}
	slices.SortFunc(jobs, func(a, b *job) int { return a.rec.StartedAt.Compare(b.rec.StartedAt) })
	snap := make([]agentapi.Event, 0, len(jobs)+2)
	for _, j := range jobs {
		if j.ended {
			snap = append(snap, j.exitedEvent())
		} else {
			snap = append(snap, j.startedEvent())
		}
	}
	now := time.Now()
	snap = append(snap, d.workerEventLocked(now), agentapi.Event{Type: agentapi.EventSynced, Time: now})
	s := &subscriber{ch: make(chan agentapi.Event, subscriberBuffer)}
	d.subs[s] = struct{}{}
	return snap, s
}

func (d *Daemon) unsubscribe(s *subscriber) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.subs[s]; ok {
		delete(d.subs, s)
		close(s.ch)
	}
}

// Events emits the state of every job, EventSynced, then every event and
// a status of each running job every StatusInterval, and an EventKeepalive
// every EventsKeepalive in which it emitted nothing else, until ctx ends.
// flush is called whenever emit has nothing more to send for a while.
func (d *Daemon) Events(ctx context.Context, emit func(agentapi.Event) error, flush func() error) error {
	snap, sub := d.subscribe()
	defer d.unsubscribe(sub)
	for _, e := range snap {
		if err := emit(e); err != nil {
			return err
		}
	}
	if err := flush(); err != nil {
		return err
	}
	tick := time.NewTicker(d.opts.StatusInterval)
	defer tick.Stop()
	keepalive := time.NewTicker(d.opts.EventsKeepalive)
	defer keepalive.Stop()
	sent := false // since the last keepalive tick
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e, ok := <-sub.ch:
			if !ok {
				return errLagged
			}
			if err := emit(e); err != nil {
				return err
			}
			sent = true
		case now := <-tick.C:
			for _, j := range d.running() {
				if err := emit(j.statusEvent(now)); err != nil {
					return err
				}
				sent = true
			}
		case now := <-keepalive.C:
			if !sent {
				if err := emit(agentapi.Event{Type: agentapi.EventKeepalive, Time: now}); err != nil {
					return err
				}
			}
			sent = false
		}
		if len(sub.ch) == 0 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
}
