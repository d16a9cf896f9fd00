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
	"sync/atomic"
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
//
// It is made of services, as gotd's tgtest/services are, each with its
// own state and lock and each registering its own methods: auth (the
// keys that logged in, the push connection), peers (users, chats, the
// bot's profile), updates (pts, qts, their history, pushes), messages
// (the chats' messages, drafts, button answers), files (uploads and
// downloads) and guests (guest queries and their answers); faults holds
// the injected faults, and journal the log of the bot's calls. A service
// may call into another while it holds its lock only down this order:
// updates.pushMu, messages, updates, then peers, files, guests, auth or
// faults, and the journal last.
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

	// queryIDs counts the ids the fake hands out for button presses,
	// guest queries and auth transfers.
	queryIDs atomic.Int64

	journal  *journal
	auth     *authService
	peers    *peerService
	updates  *updateService
	messages *messageService
	files    *fileService
	guests   *guestService
	faults   *faultService
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
		opts:    opts,
		lg:      opts.Logger,
		key:     tgtest.NewPrivateKey(key),
		dc:      tgtest.NewDispatcher(),
		common:  tgtest.NewDispatcher(),
		done:    make(chan struct{}),
		journal: newJournal(),
		faults:  newFaultService(),
	}
	s.auth = newAuthService(s)
	s.peers = newPeerService(s, opts.Bot)
	s.updates = &updateService{s: s}
	s.messages = newMessageService(s)
	s.files = newFileService(s)
	s.guests = newGuestService(s)
	for _, svc := range []interface{ register(*tgtest.Dispatcher) }{s.auth, s.peers, s.updates, s.messages, s.files, s.guests} {
		svc.register(s.dc)
	}
	config.NewService(&s.cfg, &s.cdnCfg).Register(s.common)
	s.common.Fallback(tgtest.HandlerFunc(s.unknown))
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
