package tgclient

import (
	"context"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/gotd/td/tg"
)

// manager is what feed passes updates to: the updates manager.
type manager interface {
	Handle(ctx context.Context, u tg.UpdatesClass) error
	HandleAffected(ctx context.Context, channelID int64, pts, ptsCount int) error
}

// feed passes updates to the updates manager in order, from a goroutine of
// its own, so that no caller ever waits on the manager's loop. Two kinds of
// caller would: the connection, which pushes the server's updates, and a
// Telegram call whose result carries updates (the update and affected
// hooks), which may have been made while the loop was busy with an update
// of its own. The manager's queues are short (10), and a call that waited
// there for a loop that waited for the call deadlocked the bot.
//
// It also stands between the connection and the manager while the bot
// starts. Until the manager has its state, it hands updates straight to
// the handler; with a saved state its startup getDifference then brings
// the same updates again, and a command would run twice. So with a saved
// state the feed holds the updates until the manager runs, and then gives
// them to it, which drops those it already fetched (by pts). With a fresh
// state the feed opens at once: the manager's state starts after them, so
// they are handled as they come, once.
type feed struct {
	next manager
	log  logr.Logger

	mu    sync.Mutex
	open  bool
	items []feedItem
	wake  chan struct{}
}

// feedItem is an update, or a pts increment of a messages.affected* result.
type feedItem struct {
	updates  tg.UpdatesClass
	affected *affected
}

type affected struct {
	channelID     int64
	pts, ptsCount int
}

func newFeed(next manager, log logr.Logger) *feed {
	return &feed{next: next, log: log, wake: make(chan struct{}, 1)}
}

func (f *feed) push(it feedItem) {
	f.mu.Lock()
	f.items = append(f.items, it)
	f.mu.Unlock()
	f.signal()
}

func (f *feed) signal() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// Handle implements telegram.UpdateHandler. It never blocks.
func (f *feed) Handle(_ context.Context, u tg.UpdatesClass) error {
	f.push(feedItem{updates: u})
	return nil
}

// HandleAffected implements hook.AffectedHandler. It never blocks.
func (f *feed) HandleAffected(_ context.Context, channelID int64, pts, ptsCount int) error {
	f.push(feedItem{affected: &affected{channelID: channelID, pts: pts, ptsCount: ptsCount}})
	return nil
}

// release lets the updates through, the held ones first.
func (f *feed) release() {
	f.mu.Lock()
	f.open = true
	f.mu.Unlock()
	f.signal()
}

// run passes the updates on, once released, until ctx ends.
func (f *feed) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.wake:
		}
		f.mu.Lock()
		var items []feedItem
		if f.open {
			items, f.items = f.items, nil
		}
		f.mu.Unlock()
		for _, it := range items {
			var err error
			if a := it.affected; a != nil {
				err = f.next.HandleAffected(ctx, a.channelID, a.pts, a.ptsCount)
			} else {
				err = f.next.Handle(ctx, it.updates)
			}
			if err != nil && ctx.Err() == nil {
				f.log.Error(err, "Could not pass an update to the updates manager")
			}
		}
	}
}

// lanes runs the bot's answers off the updates manager's loop, which would
// otherwise wait for each answer's Telegram calls: one goroutine per chat
// while it has work, so that the answers in a chat keep their order and a
// slow one holds up only its own chat.
//
// An answer is not cut by the end of the updates' context, the bot's
// shutdown: it runs to its end, within AnswerTimeout, while the client
// waits for the lanes before it disconnects and saves the updates
// position. A command that came before the shutdown is then answered once,
// by this bot, and not answered again by the next one: a command cut
// half-way had its error sent here and its job made there.
type lanes struct {
	mu     sync.Mutex
	queues map[int64][]func()
	wg     sync.WaitGroup
}

// AnswerTimeout bounds one answer of the bot, from the start of its turn
// in its chat's lane.
const AnswerTimeout = time.Minute

// do runs fn after the work of lane key that came before it, with ctx's
// values but not its end: fn's context ends after AnswerTimeout.
func (l *lanes) do(ctx context.Context, key int64, fn func(context.Context)) {
	ctx = context.WithoutCancel(ctx)
	run := func() {
		ctx, cancel := context.WithTimeout(ctx, AnswerTimeout)
		defer cancel()
		fn(ctx)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.queues == nil {
		l.queues = map[int64][]func(){}
	}
	q, running := l.queues[key]
	l.queues[key] = append(q, run)
	if !running {
		l.wg.Add(1)
		go l.drain(key)
	}
}

func (l *lanes) drain(key int64) {
	defer l.wg.Done()
	for {
		l.mu.Lock()
		q := l.queues[key]
		if len(q) == 0 {
			delete(l.queues, key)
			l.mu.Unlock()
			return
		}
		fn := q[0]
		q[0] = nil
		l.queues[key] = q[1:]
		l.mu.Unlock()
		fn()
	}
}

// wait waits for the work that was started.
func (l *lanes) wait() { l.wg.Wait() }
