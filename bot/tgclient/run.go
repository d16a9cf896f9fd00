package tgclient

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"github.com/gotd/contrib/middleware/floodwait"
	gotdlog "github.com/gotd/log"
	"github.com/gotd/log/logzap"
	"github.com/gotd/td/bin"
	"github.com/gotd/td/session"
	"github.com/gotd/td/telegram"
	"github.com/gotd/td/telegram/auth"
	"github.com/gotd/td/telegram/dcs"
	"github.com/gotd/td/telegram/updates"
	updhook "github.com/gotd/td/telegram/updates/hook"
	"github.com/gotd/td/tg"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"k8s.io/apimachinery/pkg/util/wait"

	"shelljob.dev/shelljob/bot"
	"shelljob.dev/shelljob/bot/botmetrics"
)

// Options configure Run.
type Options struct {
	// AppID and AppHash identify the application (my.telegram.org).
	AppID   int
	AppHash string
	// Token is the bot's token from BotFather.
	Token string
	// Session stores the session. Defaults to memory (tests).
	Session session.Storage
	// State stores the updates state. Defaults to memory (tests).
	State updates.StateStorage
	// DC, DCList and PublicKeys point the client at a server other than
	// Telegram's, such as the fake of the tests and the demo. Defaults:
	// Telegram's own.
	DC         int
	DCList     dcs.List
	PublicKeys []telegram.PublicKey
	// Log defaults to a discarding logger.
	Log logr.Logger
	// GotdDebug lets gotd log at debug level when Log does: every RPC, with
	// the messages' text. Off, gotd logs at info level and above, whatever
	// Log's verbosity.
	GotdDebug bool
	// Ready, when set, is called once the bot takes updates.
	Ready func()
	// CallTimeout bounds each attempt of a Telegram call whose context has
	// no earlier deadline. Defaults to DefaultCallTimeout.
	CallTimeout time.Duration
}

// Client is the bot's Telegram connection.
type Client struct {
	opts  Options
	lanes *lanes
	disp  tg.UpdateDispatcher
	API   *API

	// One login's parts, made anew by connect when Telegram forgot the
	// session.
	client  *telegram.Client
	gaps    *updates.Manager
	feed    *feed
	session *sessionWatch
	// self is the bot's user id, once logged in.
	self atomic.Int64
}

// errSessionLost ends a login's run when Telegram no longer knows its
// session: the server was reset, or the key was revoked.
var errSessionLost = errors.New("telegram no longer knows this session")

// New builds the client and its updates manager for b, with flood-wait
// handling: a FLOOD_WAIT answer is waited out and the call retried.
func New(b *bot.Bot, o Options) *Client {
	if o.Log.GetSink() == nil {
		o.Log = logr.Discard()
	}
	if o.Session == nil {
		o.Session = &session.StorageMemory{}
	}
	if o.DC == 0 {
		o.DC = 2
	}
	c := &Client{opts: o, disp: tg.NewUpdateDispatcher(), lanes: &lanes{}}
	// Before connect: the updates manager takes a copy of the dispatcher.
	(&handlers{bot: b, lanes: c.lanes, self: &c.self, log: o.Log}).register(&c.disp)
	c.connect()
	c.API = NewAPI(c.client, o.DC)
	return c
}

// sessionWatch ends one login's run with errSessionLost when Telegram
// shows that it no longer knows the session.
type sessionWatch struct {
	log    logr.Logger
	mu     sync.Mutex
	cancel context.CancelCauseFunc
	client *telegram.Client
	ready  atomic.Int32
	// up: the connection is ready, and no failure came since.
	up atomic.Bool
	// loggedIn is set once the login succeeded: before, a call that finds
	// no session is how the login learns that it must log in.
	loggedIn bool
}

func (w *sessionWatch) isLoggedIn() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.loggedIn
}

// lose ends the run.
func (w *sessionWatch) lose(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cancel != nil {
		w.cancel(fmt.Errorf("%w: %v", errSessionLost, err))
	}
}

// watch ends the run when a call fails for want of a session.
func (w *sessionWatch) watch(next tg.Invoker) telegram.InvokeFunc {
	return func(ctx context.Context, input bin.Encoder, output bin.Decoder) error {
		// Only a call made once logged in shows a lost session.
		loggedIn := w.isLoggedIn()
		err := next.Invoke(ctx, input, output)
		if loggedIn && sessionLost(err) {
			w.lose(err)
		}
		return err
	}
}

// connected logs a failed connection, a lost one and a reconnection, and
// checks, at each reconnection, that the session is still logged in. (The
// first connection is logged once logged in, with the bot's name.)
func (w *sessionWatch) connected(s telegram.ConnectionState) {
	switch {
	case s == telegram.ConnectionStateDisconnected && w.up.Swap(false):
		w.log.Info("Lost the connection to Telegram; reconnecting")
		return
	case s == telegram.ConnectionStateDisconnected:
		w.log.Info("Could not connect to Telegram; trying again")
		return
	case s != telegram.ConnectionStateReady:
		return
	}
	w.up.Store(true)
	if w.ready.Add(1) == 1 {
		return
	}
	w.log.Info("Reconnected to Telegram")
	if !w.isLoggedIn() {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		w.mu.Lock()
		client := w.client
		w.mu.Unlock()
		if st, err := client.Auth().Status(ctx); err == nil && !st.Authorized {
			w.lose(errors.New("not logged in after a reconnection"))
		}
	}()
}

func sessionLost(err error) bool {
	// 401: AUTH_KEY_UNREGISTERED, SESSION_EXPIRED, SESSION_REVOKED and the
	// like.
	return err != nil && auth.IsUnauthorized(err)
}

// connect makes a new gotd client with its updates manager and feed.
func (c *Client) connect() {
	o := c.opts
	c.gaps = updates.New(updates.Config{Handler: c.disp, Storage: o.State})
	c.feed = newFeed(c.gaps, o.Log)
	waiter := floodwait.NewSimpleWaiter().WithMaxRetries(10).WithMaxWait(time.Minute)
	w := &sessionWatch{log: o.Log}
	c.session = w
	client := telegram.NewClient(o.AppID, o.AppHash, telegram.Options{
		Logger:         gotdLogger(o.Log, o.GotdDebug),
		SessionStorage: o.Session,
		UpdateHandler:  c.feed,
		DC:             o.DC,
		DCList:         o.DCList,
		PublicKeys:     o.PublicKeys,
		Middlewares: []telegram.Middleware{
			markUnavailable(),
			telegram.MiddlewareFunc(w.watch),
			waiter,
			callDeadline(cmp.Or(o.CallTimeout, DefaultCallTimeout)),
			updhook.UpdateHook(c.feed.Handle),
			updhook.AffectedHook(c.feed),
			// Innermost, so that each attempt and each flood wait counts.
			telegram.MiddlewareFunc(botmetrics.Invoker),
		},
		// A server that lost our key answers -404, and gotd makes a new
		// key in place: nothing fails until the bot calls. So each
		// reconnection checks that the session is still logged in.
		OnConnectionState: w.connected,
	})
	w.mu.Lock()
	w.client = client
	w.mu.Unlock()
	c.client = client
}

// gotdLogger is the logger gotd itself logs to: log's own zap logger, so
// that the bot logs through one backend, or none when log is not backed
// by zap; at info level and above unless debug.
func gotdLogger(log logr.Logger, debug bool) gotdlog.Logger {
	u, ok := log.GetSink().(zapr.Underlier)
	if !ok {
		return logzap.New(zap.NewNop())
	}
	z := u.GetUnderlying().Named("gotd")
	if !debug {
		z = z.WithOptions(zap.IncreaseLevel(zapcore.InfoLevel))
	}
	return logzap.New(z)
}

// Run connects, logs in with the token unless the stored session is still
// authorized, reads the bot's names, sets the command menu, resumes the
// jobs a previous run left, and takes updates until ctx ends. When
// Telegram forgets the session (a reset server), it drops the session and
// logs in again.
func (c *Client) Run(ctx context.Context, b *bot.Bot) error {
	defer c.saveState()
	newBackoff := func() wait.Backoff {
		return wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Steps: math.MaxInt32, Cap: time.Minute}
	}
	retry := newBackoff()
	for {
		start := time.Now()
		err := c.runLogin(ctx, b)
		if !errors.Is(err, errSessionLost) || ctx.Err() != nil {
			return err
		}
		if time.Since(start) > time.Minute {
			retry = newBackoff()
		}
		select {
		case <-time.After(retry.Step()):
		case <-ctx.Done():
			return ctx.Err()
		}
		c.opts.Log.Info("Telegram no longer knows the bot's session (its server was reset, or the key revoked); logging in again with the token", "reason", err.Error())
		if err := c.forget(ctx); err != nil {
			return err
		}
		c.connect()
		c.API.setClient(c.client)
	}
}

// stateFlusher is an updates state that writes what it holds on Flush,
// such as ConfigMapState.
type stateFlusher interface {
	Flush(ctx context.Context) error
}

// stateSaveTimeout bounds the last write of the updates state.
const stateSaveTimeout = 10 * time.Second

// saveState writes the updates state once the client is done: the updates
// handled during the shutdown window count too, and a restart does not
// fetch their commands again.
func (c *Client) saveState() {
	f, ok := c.opts.State.(stateFlusher)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), stateSaveTimeout)
	defer cancel()
	if err := f.Flush(ctx); err != nil {
		c.opts.Log.Error(err, "Could not save the updates state; a restart may fetch some updates again")
	}
}

// forget drops the stored session. The updates state stays: Telegram
// counts updates per account, not per session, so the next login fetches
// what came meanwhile.
func (c *Client) forget(ctx context.Context) error {
	if err := c.opts.Session.StoreSession(ctx, nil); err != nil {
		return fmt.Errorf("drop the lost session: %w", err)
	}
	return nil
}

// runLogin is one login's run.
func (c *Client) runLogin(ctx context.Context, b *bot.Bot) error {
	// The connection outlives ctx until the answers under way are done
	// (lanes): they still call Telegram.
	connCtx, disconnect := context.WithCancel(context.WithoutCancel(ctx))
	defer disconnect()
	defer context.AfterFunc(ctx, func() {
		c.lanes.wait()
		disconnect()
	})()
	return c.client.Run(connCtx, func(conn context.Context) error {
		ctx, cancel := context.WithCancelCause(ctx)
		defer context.AfterFunc(conn, func() { cancel(context.Cause(conn)) })()
		w := c.session
		w.mu.Lock()
		w.cancel = cancel
		w.mu.Unlock()
		go c.feed.run(ctx)
		defer c.lanes.wait()
		defer cancel(nil)
		err := c.login(ctx, b)
		if cause := context.Cause(ctx); errors.Is(cause, errSessionLost) {
			return cause
		}
		if sessionLost(err) {
			return fmt.Errorf("%w: %v", errSessionLost, err)
		}
		return err
	})
}

// login logs in and takes updates until ctx ends.
func (c *Client) login(ctx context.Context, b *bot.Bot) error {
	st, err := c.client.Auth().Status(ctx)
	if err != nil {
		return fmt.Errorf("auth status: %w", err)
	}
	if !st.Authorized {
		if _, err := c.client.Auth().Bot(ctx, c.opts.Token); err != nil {
			return fmt.Errorf("bot login: %w", err)
		}
	}
	self, err := c.client.Self(ctx)
	if err != nil {
		return fmt.Errorf("read the bot's profile: %w", err)
	}
	c.self.Store(self.ID)
	c.session.mu.Lock()
	c.session.loggedIn = true
	c.session.mu.Unlock()
	var aliases []string
	for _, u := range self.Usernames {
		if u.Active && u.Username != self.Username {
			aliases = append(aliases, u.Username)
		}
	}
	b.SetNames(self.Username, aliases)
	c.opts.Log.Info("Connected to Telegram", "bot", self.Username, "botID", self.ID, "dc", c.opts.DC, "dcAddr", c.dcAddr(), "loggedIn", !st.Authorized)
	if c.savedState(ctx, self.ID) {
		c.opts.Log.Info("Updates state loaded; fetching what came since")
	} else {
		// A fresh state starts after everything that came so far:
		// the held updates are handled as they are, once.
		c.opts.Log.Info("No saved updates state; starting from the server's")
		c.feed.release()
	}
	var cmds []tg.BotCommand
	for _, cmd := range bot.Commands {
		cmds = append(cmds, tg.BotCommand{Command: cmd.Command, Description: cmd.Description})
	}
	if _, err := c.client.API().BotsSetBotCommands(ctx, &tg.BotsSetBotCommandsRequest{
		Scope: &tg.BotCommandScopeDefault{}, Commands: cmds,
	}); err != nil {
		return fmt.Errorf("set the command menu: %w", err)
	}
	// The pumps run on this login's context: after a login again, the
	// jobs of the lost one are resumed as after a restart.
	if err := b.Start(ctx); err != nil {
		c.opts.Log.Error(err, "Could not resume undelivered jobs")
	}
	return c.gaps.Run(ctx, c.client.API(), self.ID, updates.AuthOptions{
		IsBot: true,
		OnStart: func(ctx context.Context) {
			// The manager has its state; it runs once this returns.
			c.feed.release()
			if c.opts.Ready != nil {
				c.opts.Ready()
			}
		},
	})
}

// dcAddr is the address of the DC the client dials, "" for Telegram's own.
func (c *Client) dcAddr() string {
	for _, o := range c.opts.DCList.Options {
		if o.ID == c.opts.DC {
			return net.JoinHostPort(o.IPAddress, strconv.Itoa(o.Port))
		}
	}
	return ""
}

// savedState tells whether the updates state of the bot is stored, so that
// the manager starts from it and fetches what came after it.
func (c *Client) savedState(ctx context.Context, self int64) bool {
	if c.opts.State == nil {
		return false
	}
	_, found, err := c.opts.State.GetState(ctx, self)
	return err == nil && found
}
