package faketg

import (
	"strings"
	"sync"

	"github.com/gotd/td/bin"
	"github.com/gotd/td/tg"
	"github.com/gotd/td/tgerr"
)

// faultService holds the faults and holds tests inject into the bot's
// calls, taken before a call is served.
type faultService struct {
	mu     sync.Mutex
	faults map[uint32][]fault
	holds  map[uint32][]*hold
}

func newFaultService() *faultService {
	return &faultService{faults: map[uint32][]fault{}, holds: map[uint32][]*hold{}}
}

type fault struct {
	left  int // <0: unlimited
	err   *tgerr.Error
	match func(bin.Object) bool
}

// RPCError makes the RPC error Telegram would send for an error type such
// as "FLOOD_WAIT_3" (420), "MESSAGE_ID_INVALID" (400) or
// "AUTH_KEY_UNREGISTERED" (401).
func RPCError(typ string) *tgerr.Error {
	code := 400
	switch {
	case strings.HasPrefix(typ, "FLOOD_WAIT_"), strings.HasPrefix(typ, "FLOOD_PREMIUM_WAIT_"), strings.HasPrefix(typ, "SLOWMODE_WAIT_"):
		code = 420
	case strings.HasPrefix(typ, "AUTH_KEY_"), typ == "SESSION_REVOKED", typ == "SESSION_EXPIRED":
		code = 401
	case strings.HasSuffix(typ, "_FORBIDDEN"), typ == "MESSAGE_AUTHOR_REQUIRED":
		code = 403
	case typ == "INTERNAL", strings.HasSuffix(typ, "_INTERNAL"):
		code = 500
	}
	return tgerr.New(code, typ)
}

// FailNext makes the next n calls of a method (a request TypeID such as
// tg.MessagesEditMessageRequestTypeID) fail with err. The failed calls are
// in the log with Event.Err set. Faults of one method queue up in order.
func (s *Server) FailNext(method uint32, n int, err *tgerr.Error) {
	s.FailWhen(method, n, err, nil)
}

// FailWhen makes the next n calls of a method for which match returns true
// fail with err; n < 0 means every such call, for good. match gets the
// decoded request (e.g. *tg.MessagesEditMessageRequest); nil matches all.
func (s *Server) FailWhen(method uint32, n int, err *tgerr.Error, match func(bin.Object) bool) {
	if n == 0 {
		return
	}
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	s.faults.faults[method] = append(s.faults.faults[method], fault{left: n, err: err, match: match})
}

// ClearFaults removes every pending fault.
func (s *Server) ClearFaults() {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	s.faults.faults = map[uint32][]fault{}
}

// pending tells whether method has faults or holds waiting.
func (f *faultService) pending(method uint32) (faults, holds bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.faults[method]) > 0, len(f.holds[method]) > 0
}

// takeFault consumes the first fault of method that matches req.
func (f *faultService) takeFault(method uint32, req bin.Object) *tgerr.Error {
	f.mu.Lock()
	defer f.mu.Unlock()
	fs := f.faults[method]
	for i := range fs {
		ft := &fs[i]
		if ft.match != nil && !ft.match(req) {
			continue
		}
		err := ft.err
		if ft.left > 0 {
			ft.left--
			if ft.left == 0 {
				f.faults[method] = append(fs[:i:i], fs[i+1:]...)
			}
		}
		return err
	}
	return nil
}

type hold struct {
	match   func(bin.Object) bool
	held    chan struct{}
	release chan struct{}
}

// Hold makes the next call of a method for which match returns true (nil
// matches all) wait, before the fake serves it, until release is called;
// held is closed once such a call waits. The fake serves the calls of a
// connection in order, so the client's later calls wait behind it, while
// the updates the fake pushes still go out.
func (s *Server) Hold(method uint32, match func(bin.Object) bool) (held <-chan struct{}, release func()) {
	h := &hold{match: match, held: make(chan struct{}), release: make(chan struct{})}
	s.faults.mu.Lock()
	s.faults.holds[method] = append(s.faults.holds[method], h)
	s.faults.mu.Unlock()
	var once sync.Once
	return h.held, func() { once.Do(func() { close(h.release) }) }
}

// takeHold removes and returns the first hold of method that matches req.
func (f *faultService) takeHold(method uint32, req bin.Object) *hold {
	f.mu.Lock()
	defer f.mu.Unlock()
	hs := f.holds[method]
	for i, h := range hs {
		if h.match == nil || h.match(req) {
			f.holds[method] = append(hs[:i:i], hs[i+1:]...)
			return h
		}
	}
	return nil
}

// MethodID is the request TypeID of a method by its TL name, such as
// "messages.editMessage", for FailNext.
func MethodID(name string) (uint32, bool) {
	id, ok := typeIDs[name]
	return id, ok
}

var typeIDs = tg.NamesMap()
