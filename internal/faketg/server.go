package faketg

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/go-faster/errors"
	"go.uber.org/zap"

	"github.com/gotd/td/crypto"
	"github.com/gotd/td/exchange"
	"github.com/gotd/td/telegram"
	"github.com/gotd/td/telegram/dcs"
	"github.com/gotd/td/tg"
	"github.com/gotd/td/tgtest"
	"github.com/gotd/td/tgtest/services/config"
	"github.com/gotd/td/transport"
)

// Server is a fake Telegram: one DC that speaks real MTProto over TCP.
// Create it with New, then Start it (or use NewTest in tests).
type Server struct {
	opts Options
	lg   *zap.Logger

	key    exchange.PrivateKey
	srv    *tgtest.Server
	dc     *tgtest.Dispatcher // the DC's methods; falls back to common
	common *tgtest.Dispatcher // help.getConfig and the unknown-method fallback
	cfg    tg.Config
	cdnCfg tg.CDNConfig

	ln      net.Listener
	addr    string // advertised host:port
	cancel  context.CancelFunc
	done    chan struct{}
	serveMu sync.Mutex
	err     error

	// pushMu orders pushes, so updates reach the bot in pts order.
	pushMu sync.Mutex

	mu      sync.Mutex
	changed chan struct{}
	log     Log

	authorized map[[8]byte]bool
	exported   map[string]bool // auth.exportAuthorization tokens
	mainKey    [8]byte         // the auth key that logged in last
	session    tgtest.Session
	hasSession bool
	connected  bool

	users    map[int64]*User
	userList []*User
	chats    map[chatKey]*Chat
	chatList []*Chat

	pts, qts  int
	history   []ptsEntry // common pts box: private chats and groups
	qtsLog    []qtsEntry
	nextMsgID int // common message box

	nextUserID  int64
	nextChatID  int64
	nextQueryID int64
	nextFileID  int64
	nextInline  int

	box       map[int]*Message // the common box by message ID
	callbacks map[int64]*callbackRef
	commands  []tg.BotCommand

	uploads map[int64]map[int][]byte // the bot's upload parts by file ID
	// assembled are the bot's uploads once put together: a retried send
	// may name the same upload again.
	assembled map[int64][]byte
	media     map[int64]*Media // files users sent, by document/photo ID
	// kept lists the IDs of media and uploads whose bytes are held, oldest
	// first, and keptBytes their sum, for Options.FileBytes.
	kept      []keptFile
	keptBytes int64
	inline    map[int64]*Message  // guest answers by InputBotInlineMessageID64.ID
	queries   map[int64]*guestRef // guest queries by query ID
	faults    map[uint32][]fault
	holds     map[uint32][]*hold
}

type chatKey struct {
	kind ChatKind
	id   int64
}

// New creates a fake Telegram. It generates the RSA key (unless given)
// but does not listen yet; call Start.
func New(opts Options) (*Server, error) {
	opts.setDefaults()
	key := opts.PrivateKey
	if key == nil {
		k, err := rsa.GenerateKey(opts.Random, crypto.RSAKeyBits)
		if err != nil {
			return nil, errors.Wrap(err, "generate key")
		}
		key = k
	}
	s := &Server{
		opts:       opts,
		lg:         opts.Logger,
		key:        tgtest.NewPrivateKey(key),
		dc:         tgtest.NewDispatcher(),
		common:     tgtest.NewDispatcher(),
		uploads:    map[int64]map[int][]byte{},
		assembled:  map[int64][]byte{},
		changed:    make(chan struct{}),
		authorized: map[[8]byte]bool{},
		exported:   map[string]bool{},
		users:      map[int64]*User{},
		chats:      map[chatKey]*Chat{},
		nextUserID: 1000001,
		nextChatID: 2000001,
		nextFileID: 5000001,
		media:      map[int64]*Media{},
		box:        map[int]*Message{},
		callbacks:  map[int64]*callbackRef{},
		inline:     map[int64]*Message{},
		queries:    map[int64]*guestRef{},
		faults:     map[uint32][]fault{},
		holds:      map[uint32][]*hold{},
		done:       make(chan struct{}),
	}
	config.NewService(&s.cfg, &s.cdnCfg).Register(s.common)
	s.common.Fallback(tgtest.HandlerFunc(s.unknown))
	s.register()
	s.dc.Fallback(s.common)
	s.srv = tgtest.NewServer(s.key, tgtest.UnpackInvoke(tgtest.HandlerFunc(s.serve)), tgtest.ServerOptions{
		DC:          opts.DC,
		Random:      opts.Random,
		Logger:      zapLogger{s.lg.Named("mtproto")},
		ReadTimeout: opts.ReadTimeout,
	})
	return s, nil
}

// Start listens on Options.Addr and serves in the background until ctx
// ends or Close is called.
func (s *Server) Start(ctx context.Context) error {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", s.opts.Addr)
	if err != nil {
		return errors.Wrap(err, "listen")
	}
	s.ln = ln
	s.addr = s.opts.Advertise
	if s.addr == "" {
		s.addr = ln.Addr().String()
	}
	host, portStr, err := net.SplitHostPort(s.addr)
	if err != nil {
		_ = ln.Close()
		return errors.Wrap(err, "advertise address")
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		_ = ln.Close()
		return errors.Wrap(err, "advertise port")
	}
	if port == 0 {
		port = ln.Addr().(*net.TCPAddr).Port
		s.addr = net.JoinHostPort(host, strconv.Itoa(port))
	}
	ip := net.ParseIP(host)
	s.cfg = tg.Config{
		ThisDC:               s.opts.DC,
		DCOptions:            []tg.DCOption{{ID: s.opts.DC, IPAddress: host, Port: port, Static: true, Ipv6: ip != nil && ip.To4() == nil}},
		DCTxtDomainName:      "localhost",
		ChatSizeMax:          200,
		MegagroupSizeMax:     200000,
		ForwardedCountMax:    100,
		OnlineUpdatePeriodMs: 120000,
		OfflineBlurTimeoutMs: 5000,
		OfflineIdleTimeoutMs: 30000,
		OnlineCloudTimeoutMs: 300000,
		NotifyCloudDelayMs:   30000,
		NotifyDefaultDelayMs: 1500,
		PushChatPeriodMs:     60000,
		PushChatLimit:        2,
		EditTimeLimit:        172800,
		RevokeTimeLimit:      2147483647,
		RevokePmTimeLimit:    2147483647,
		RatingEDecay:         2419200,
		StickersRecentLimit:  200,
		CaptionLengthMax:     1024,
		MessageLengthMax:     4096,
		WebfileDCID:          s.opts.DC,
		Date:                 int(time.Now().Unix()),
		Expires:              int(time.Now().Add(time.Hour).Unix()),
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	go func() {
		defer close(s.done)
		err := s.srv.Serve(ctx, transport.ListenCodec(nil, ln))
		s.serveMu.Lock()
		s.err = err
		s.serveMu.Unlock()
	}()
	s.lg.Info("Fake Telegram listening", zap.String("addr", ln.Addr().String()), zap.String("advertise", s.addr), zap.Int("dc", s.opts.DC))
	return nil
}

// Close stops the server and waits for it.
func (s *Server) Close() error {
	if s.cancel == nil {
		return nil
	}
	s.cancel()
	<-s.done
	s.serveMu.Lock()
	defer s.serveMu.Unlock()
	return s.err
}

// Addr is the advertised DC address, "host:port".
func (s *Server) Addr() string { return s.addr }

// ListenAddr is the address the server listens on.
func (s *Server) ListenAddr() string { return s.ln.Addr().String() }

// DC is the ID of the fake's only DC.
func (s *Server) DC() int { return s.opts.DC }

// DCList is the fake's DC address list, for telegram.Options.DCList.
func (s *Server) DCList() dcs.List {
	return dcs.List{Options: append([]tg.DCOption(nil), s.cfg.DCOptions...)}
}

// PublicKeys are the server's keys, for telegram.Options.PublicKeys.
func (s *Server) PublicKeys() []telegram.PublicKey {
	return []telegram.PublicKey{s.key.Public()}
}

// PublicKeyPEM is the server's public key as a PKCS#1 "RSA PUBLIC KEY"
// PEM block, the form Telegram publishes its keys in. gotd's
// crypto.ParseRSAPublicKeys reads it.
func (s *Server) PublicKeyPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{
		Type:  "RSA PUBLIC KEY",
		Bytes: x509.MarshalPKCS1PublicKey(s.key.RSA.Public().(*rsa.PublicKey)),
	})
}

// PrivateKeyPEM is the server's private key (PKCS#1), for LoadPrivateKey.
func (s *Server) PrivateKeyPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{
		Type:  "RSA PRIVATE KEY",
		Bytes: x509.MarshalPKCS1PrivateKey(s.key.RSA),
	})
}

// LoadPrivateKey reads a PEM private key written from PrivateKeyPEM.
func LoadPrivateKey(path string) (*rsa.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	b, _ := pem.Decode(data)
	if b == nil {
		return nil, errors.Errorf("%s: no PEM block", path)
	}
	k, err := x509.ParsePKCS1PrivateKey(b.Bytes)
	if err != nil {
		return nil, errors.Wrap(err, "parse key")
	}
	return k, nil
}

// BotToken is the token the fake accepts.
func (s *Server) BotToken() string { return s.opts.BotToken }

// ClientOptions are the telegram.Options fields that point a gotd client
// at the fake: PublicKeys, DC and DCList. The caller adds the rest
// (session storage, update handler, middlewares).
func (s *Server) ClientOptions() telegram.Options {
	return telegram.Options{
		PublicKeys: s.PublicKeys(),
		DC:         s.opts.DC,
		DCList:     s.DCList(),
	}
}

// BotID is the bot's user ID.
func (s *Server) BotID() int64 { return s.opts.Bot.ID }

// Connected reports whether the bot has an authorized connection that
// updates are pushed to.
func (s *Server) Connected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hasSession && s.connected
}

// DisconnectBot closes the bot's current connection, as a network failure
// would. gotd reconnects by itself (and calls users.getUsers); updates
// pushed meanwhile reach it through updates.getDifference once the next
// update shows it the pts gap. WaitConnected waits for that
// getDifference, so after a reconnect wait for the bot's reaction instead.
func (s *Server) DisconnectBot() {
	s.mu.Lock()
	sess, ok := s.session, s.hasSession
	s.connected = false
	s.mu.Unlock()
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
		s.mu.Lock()
		ok, ch := s.connected, s.changed
		s.mu.Unlock()
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
