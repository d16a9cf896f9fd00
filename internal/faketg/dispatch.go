package faketg

import (
	"strings"
	"time"

	"github.com/go-faster/errors"
	"go.uber.org/zap"

	"github.com/gotd/td/bin"
	"github.com/gotd/td/tg"
	"github.com/gotd/td/tgerr"
	"github.com/gotd/td/tgtest"
)

// methodName is the TL name of a type ID, without its "#id" suffix.
func methodName(id uint32) string {
	name, ok := typeNames[id]
	if !ok {
		return "unknown#" + strings.TrimLeft(strings.ToLower(errors.Errorf("%x", id).Error()), "0")
	}
	if i := strings.IndexByte(name, '#'); i >= 0 {
		name = name[:i]
	}
	return name
}

var (
	typeNames   = tg.TypesMap()
	typeDecoder = tg.TypesConstructorMap()
)

// serve runs before every method: authorization, the push session and
// injected faults.
func (s *Server) serve(srv *tgtest.Server, req *tgtest.Request) error {
	id, err := req.Buf.PeekID()
	if err != nil {
		return err
	}
	name := methodName(id)
	authorized := s.auth.track(req.Session)
	hasFault, hasHold := s.faults.pending(id)
	if !authorized && !strings.HasPrefix(name, "auth.") && !strings.HasPrefix(name, "help.") {
		return tgerr.New(401, "AUTH_KEY_UNREGISTERED")
	}
	if hasHold {
		obj, err := decodeRequest(id, req.Buf)
		if err != nil {
			return err
		}
		if h := s.faults.takeHold(id, obj); h != nil {
			close(h.held)
			<-h.release
		}
	}
	if hasFault {
		obj, err := decodeRequest(id, req.Buf)
		if err != nil {
			return err
		}
		now := time.Now()
		if ferr := s.faults.takeFault(id, obj); ferr != nil {
			ev := s.describe(obj, now)
			ev.Err = ferr
			s.journal.record(ev)
			return ferr
		}
	}
	return s.dc.OnMessage(srv, req)
}

// decodeRequest decodes a request without consuming buf.
func decodeRequest(id uint32, buf *bin.Buffer) (bin.Object, error) {
	ctor, ok := typeDecoder[id]
	if !ok {
		return nil, errors.Errorf("unknown type %#x", id)
	}
	obj := ctor()
	b := &bin.Buffer{Buf: buf.Copy()}
	if err := obj.Decode(b); err != nil {
		return nil, errors.Wrapf(err, "decode %s", methodName(id))
	}
	return obj, nil
}

// unknown is the fallback of the common dispatcher: methods the fake does
// not serve.
func (s *Server) unknown(_ *tgtest.Server, req *tgtest.Request) error {
	id, _ := req.Buf.PeekID()
	name := methodName(id)
	s.lg.Error("Method not served by the fake", zap.String("method", name))
	obj, _ := decodeRequest(id, req.Buf)
	err := tgerr.New(400, "INPUT_METHOD_INVALID")
	s.journal.record(Event{Time: time.Now(), Kind: Unknown, Method: name, Request: obj, Err: err})
	return err
}

// handle registers on d a method whose request type is R.
func handle[R any, P interface {
	*R
	bin.Object
}](d *tgtest.Dispatcher, id uint32, h func(srv *tgtest.Server, req *tgtest.Request, r P) error) {
	d.HandleFunc(id, func(srv *tgtest.Server, req *tgtest.Request) error {
		r := P(new(R))
		if err := r.Decode(req.Buf); err != nil {
			return errors.Wrapf(err, "decode %s", methodName(id))
		}
		return h(srv, req, r)
	})
}
