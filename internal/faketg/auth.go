package faketg

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-faster/errors"
	"go.uber.org/zap"

	"github.com/gotd/td/tg"
	"github.com/gotd/td/tgerr"
	"github.com/gotd/td/tgtest"
)

// authService knows the auth keys that logged in, and the connection the
// bot's updates are pushed to: the newest one of the key that logged in
// last (auth.importBotAuthorization). Connections made by auth transfer
// (telegram.Client.DC) are authorized but get no pushes.
type authService struct {
	s *Server

	mu         sync.Mutex
	authorized map[[8]byte]bool
	exported   map[string]bool // auth.exportAuthorization tokens
	mainKey    [8]byte         // the auth key that logged in last
	session    tgtest.Session
	hasSession bool
	// connected: the push connection's updates manager asked for the
	// state, so pushed updates reach it.
	connected bool
}

func newAuthService(s *Server) *authService {
	return &authService{s: s, authorized: map[[8]byte]bool{}, exported: map[string]bool{}}
}

func (a *authService) register(d *tgtest.Dispatcher) {
	handle(d, tg.AuthImportBotAuthorizationRequestTypeID, a.importBotAuthorization)
	handle(d, tg.AuthLogOutRequestTypeID, a.logOut)
	handle(d, tg.AuthExportAuthorizationRequestTypeID, a.exportAuthorization)
	handle(d, tg.AuthImportAuthorizationRequestTypeID, a.importAuthorization)
}

// track notes the connection of a request, and tells whether its key is
// authorized. A new connection of the key that logged in (a restarted
// bot, or a reconnect) becomes the push connection, which gets pushes
// once its updates manager asked for the state.
func (a *authService) track(sess tgtest.Session) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	authorized := a.authorized[sess.AuthKey.ID]
	if authorized && sess.AuthKey.ID == a.mainKey {
		if !a.hasSession || a.session.ID != sess.ID {
			a.s.lg.Debug("Bot session", zap.Int64("session_id", sess.ID))
			a.connected = false
		}
		a.session = sess
		a.hasSession = true
	}
	return authorized
}

// pushSession is the connection the bot's updates go to, if any.
func (a *authService) pushSession() (tgtest.Session, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.session, a.hasSession
}

// setConnected records that the push connection asked for the state.
func (a *authService) setConnected() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.connected = true
}

// lost records that a push to session failed: the bot catches up once it
// asks for the state again.
func (a *authService) lost(session int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.session.ID == session {
		a.connected = false
	}
}

// Connected reports whether the bot has an authorized connection that
// updates are pushed to.
func (s *Server) Connected() bool {
	s.auth.mu.Lock()
	defer s.auth.mu.Unlock()
	return s.auth.hasSession && s.auth.connected
}

// DisconnectBot closes the bot's current connection, as a network failure
// would. gotd reconnects by itself (and calls users.getUsers); updates
// pushed meanwhile reach it through updates.getDifference once the next
// update shows it the pts gap. WaitConnected waits for that
// getDifference, so after a reconnect wait for the bot's reaction instead.
func (s *Server) DisconnectBot() {
	a := s.auth
	a.mu.Lock()
	sess, ok := a.session, a.hasSession
	a.connected = false
	a.mu.Unlock()
	if ok {
		s.srv.ForceDisconnect(sess)
	}
}

// WaitConnected waits until the bot is logged in and its current
// connection has called updates.getState or updates.getDifference, so
// pushed updates reach it. After a restart of the bot it waits for the new
// connection.
func (s *Server) WaitConnected(ctx context.Context) error {
	for {
		// The channel first: a change after the check closes it.
		_, ch := s.journal.snapshot()
		s.auth.mu.Lock()
		ok := s.auth.connected
		s.auth.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return errors.Wrap(ctx.Err(), "wait for the bot")
		}
	}
}

func (a *authService) importBotAuthorization(srv *tgtest.Server, req *tgtest.Request, r *tg.AuthImportBotAuthorizationRequest) error {
	ev := Event{Time: time.Now(), Kind: Call, Method: "auth.importBotAuthorization", Request: r}
	if r.BotAuthToken != a.s.opts.BotToken {
		ev.Err = tgerr.New(401, "ACCESS_TOKEN_INVALID")
		a.s.journal.record(ev)
		return ev.Err
	}
	a.mu.Lock()
	a.authorized[req.Session.AuthKey.ID] = true
	a.mainKey = req.Session.AuthKey.ID
	a.session, a.hasSession = req.Session, true
	a.connected = false
	a.mu.Unlock()
	a.s.journal.record(ev)
	return srv.SendResult(req, &tg.AuthAuthorization{User: a.s.peers.botUser()})
}

func (a *authService) logOut(srv *tgtest.Server, req *tgtest.Request, _ *tg.AuthLogOutRequest) error {
	a.mu.Lock()
	delete(a.authorized, req.Session.AuthKey.ID)
	a.mu.Unlock()
	a.s.journal.call("auth.logOut", nil)
	return srv.SendResult(req, &tg.AuthLoggedOut{})
}

// exportAuthorization and importAuthorization serve gotd's auth transfer
// (telegram.Client.DC), which makes a second authorized connection.
func (a *authService) exportAuthorization(srv *tgtest.Server, req *tgtest.Request, r *tg.AuthExportAuthorizationRequest) error {
	a.s.journal.call("auth.exportAuthorization", r)
	a.mu.Lock()
	ok := a.authorized[req.Session.AuthKey.ID]
	token := []byte(fmt.Sprintf("export-%d", a.s.queryIDs.Add(1)))
	if ok {
		a.exported[string(token)] = true
	}
	a.mu.Unlock()
	if !ok {
		return tgerr.New(401, "AUTH_KEY_UNREGISTERED")
	}
	return srv.SendResult(req, &tg.AuthExportedAuthorization{ID: a.s.opts.Bot.ID, Bytes: token})
}

func (a *authService) importAuthorization(srv *tgtest.Server, req *tgtest.Request, r *tg.AuthImportAuthorizationRequest) error {
	a.s.journal.call("auth.importAuthorization", r)
	a.mu.Lock()
	ok := r.ID == a.s.opts.Bot.ID && a.exported[string(r.Bytes)]
	if ok {
		delete(a.exported, string(r.Bytes))
		a.authorized[req.Session.AuthKey.ID] = true
	}
	a.mu.Unlock()
	if !ok {
		return tgerr.New(400, "AUTH_BYTES_INVALID")
	}
	return srv.SendResult(req, &tg.AuthAuthorization{User: a.s.peers.botUser()})
}
