package faketg

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/gotd/td/proto"
	"github.com/gotd/td/tg"
	"github.com/gotd/td/tgtest"
)

// updateService keeps the bot's updates state: the common pts box (private
// chats and basic groups), each channel's own pts box (in its Chat), and
// the qts of guest queries, with the history that updates.getDifference
// and updates.getChannelDifference serve. It pushes updates to the bot's
// connection.
type updateService struct {
	s *Server

	// pushMu orders pushes, so updates reach the bot in pts order. A
	// user's action holds it from its first change to its push, before
	// any other lock.
	pushMu sync.Mutex

	mu      sync.Mutex
	pts     int
	qts     int
	history []ptsEntry // the common pts box
	qtsLog  []qtsEntry
}

// ptsEntry is one pts-carrying update in a pts history.
type ptsEntry struct {
	pts    int
	update tg.UpdateClass
}

// qtsEntry is one qts-carrying update.
type qtsEntry struct {
	qts    int
	update tg.UpdateClass
}

func (u *updateService) register(d *tgtest.Dispatcher) {
	handle(d, tg.UpdatesGetStateRequestTypeID, u.getState)
	handle(d, tg.UpdatesGetDifferenceRequestTypeID, u.getDifference)
	handle(d, tg.UpdatesGetChannelDifferenceRequestTypeID, u.getChannelDifference)
}

// add records a pts update of chat's box with the next pts. The history
// keeps a copy: encoding a tg object writes its flags, so the returned
// update (which the caller sends) must not be shared.
func (u *updateService) add(c *Chat, mk func(pts int) tg.UpdateClass) tg.UpdateClass {
	u.mu.Lock()
	defer u.mu.Unlock()
	if c.Channel() {
		c.pts++
		upd := mk(c.pts)
		c.history = append(c.history, ptsEntry{pts: c.pts, update: cloneUpdate(upd)})
		return upd
	}
	u.pts++
	upd := mk(u.pts)
	u.history = append(u.history, ptsEntry{pts: u.pts, update: cloneUpdate(upd)})
	return upd
}

// deleted records the deletion of messages ids of channel's box (nil:
// the common box), and returns the result of the delete: no pts for none.
func (u *updateService) deleted(channel *Chat, ids []int) *tg.MessagesAffectedMessages {
	u.mu.Lock()
	defer u.mu.Unlock()
	c := channel
	pts := &u.pts
	if c != nil {
		pts = &c.pts
	}
	if len(ids) == 0 {
		return &tg.MessagesAffectedMessages{Pts: *pts, PtsCount: 0}
	}
	*pts += len(ids)
	if c != nil {
		c.history = append(c.history, ptsEntry{pts: c.pts, update: &tg.UpdateDeleteChannelMessages{ChannelID: c.ID, Messages: ids, Pts: c.pts, PtsCount: len(ids)}})
	} else {
		u.history = append(u.history, ptsEntry{pts: u.pts, update: &tg.UpdateDeleteMessages{Messages: ids, Pts: u.pts, PtsCount: len(ids)}})
	}
	return &tg.MessagesAffectedMessages{Pts: *pts, PtsCount: len(ids)}
}

// channelPts is the pts of a channel's box.
func (u *updateService) channelPts(c *Chat) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return c.pts
}

// addQts records a qts update with the next qts.
func (u *updateService) addQts(mk func(qts int) tg.UpdateClass) tg.UpdateClass {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.qts++
	upd := mk(u.qts)
	u.qtsLog = append(u.qtsLog, qtsEntry{qts: u.qts, update: cloneUpdate(upd)})
	return upd
}

// push sends updates to the bot's connection. A bot that is not connected
// misses them; pts/qts updates then reach it through getDifference, as
// on Telegram. pushMu must be held.
func (u *updateService) push(ctx context.Context, upd tg.UpdatesClass) error {
	s := u.s
	sess, ok := s.auth.pushSession()
	if !ok {
		return nil
	}
	if err := s.srv.Send(ctx, sess, proto.MessageFromServer, upd); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.lg.Debug("Push failed; the bot will catch up", zap.Error(err))
		s.auth.lost(sess.ID)
	}
	return nil
}

func (u *updateService) stateLocked() tg.UpdatesState {
	return tg.UpdatesState{Pts: u.pts, Qts: u.qts, Date: int(time.Now().Unix())}
}

// getState and getDifference mark the bot connected once its state is
// taken, under the lock that numbers updates: an update made after
// WaitConnected returns is past that state, so the push or the next
// difference brings it. Marked before, an update could slip into the
// state the bot got, and reach it never.
func (u *updateService) getState(srv *tgtest.Server, req *tgtest.Request, r *tg.UpdatesGetStateRequest) error {
	u.mu.Lock()
	st := u.stateLocked()
	u.s.auth.setConnected()
	u.mu.Unlock()
	// The record wakes WaitConnected, so it comes after the mark.
	u.s.journal.call("updates.getState", r)
	return srv.SendResult(req, &st)
}

func (u *updateService) getDifference(srv *tgtest.Server, req *tgtest.Request, r *tg.UpdatesGetDifferenceRequest) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	st := u.stateLocked()
	u.s.auth.setConnected()
	u.s.journal.call("updates.getDifference", r)
	// A state ahead of ours is from another server (the fake restarted):
	// everything this one has is new to the bot, and the full difference
	// moves its state back to ours.
	reset := r.Pts > u.pts || r.Qts > u.qts
	if reset {
		r.Pts, r.Qts = 0, 0
	}
	var (
		msgs  []tg.MessageClass
		other []tg.UpdateClass
	)
	for _, e := range u.history {
		if e.pts <= r.Pts {
			continue
		}
		if n, ok := e.update.(*tg.UpdateNewMessage); ok {
			msgs = append(msgs, n.Message)
			continue
		}
		other = append(other, e.update)
	}
	for _, e := range u.qtsLog {
		if e.qts > r.Qts {
			other = append(other, e.update)
		}
	}
	if len(msgs) == 0 && len(other) == 0 && !reset {
		return srv.SendResult(req, &tg.UpdatesDifferenceEmpty{Date: st.Date})
	}
	if msgs == nil {
		msgs = []tg.MessageClass{}
	}
	if other == nil {
		other = []tg.UpdateClass{}
	}
	return srv.SendResult(req, &tg.UpdatesDifference{
		NewMessages:          msgs,
		NewEncryptedMessages: []tg.EncryptedMessageClass{},
		OtherUpdates:         other,
		Chats:                u.s.peers.tgChats(),
		Users:                u.s.peers.tgUsers(),
		State:                st,
	})
}

func (u *updateService) getChannelDifference(srv *tgtest.Server, req *tgtest.Request, r *tg.UpdatesGetChannelDifferenceRequest) error {
	u.s.journal.call("updates.getChannelDifference", r)
	chat, err := u.s.peers.channel(r.Channel)
	if err != nil {
		return err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if r.Pts >= chat.pts {
		return srv.SendResult(req, &tg.UpdatesChannelDifferenceEmpty{Final: true, Pts: chat.pts})
	}
	limit := r.Limit
	if limit <= 0 || limit > 100 {
		limit = 100
	}
	var (
		msgs  = []tg.MessageClass{}
		other = []tg.UpdateClass{}
		pts   = r.Pts
		final = true
	)
	for _, e := range chat.history {
		if e.pts <= r.Pts {
			continue
		}
		if len(msgs)+len(other) >= limit {
			final = false
			break
		}
		pts = e.pts
		if n, ok := e.update.(*tg.UpdateNewChannelMessage); ok {
			msgs = append(msgs, n.Message)
			continue
		}
		other = append(other, e.update)
	}
	return srv.SendResult(req, &tg.UpdatesChannelDifference{
		Final:        final,
		Pts:          pts,
		NewMessages:  msgs,
		OtherUpdates: other,
		Chats:        u.s.peers.tgChats(),
		Users:        u.s.peers.tgUsers(),
	})
}

// cloneUpdate deep-copies an update through its TL encoding.
func cloneUpdate(u tg.UpdateClass) tg.UpdateClass { return cloneTL(u, tg.DecodeUpdate) }
