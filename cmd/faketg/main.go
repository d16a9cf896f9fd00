// Command faketg runs a fake Telegram (internal/faketg) for the shelljob bot
// and lets you chat with the bot from the terminal.
//
// It listens on -listen, prints the DC address and writes the server's
// public key to -key-out, which is all the bot needs besides the token
// (-token). It makes a small world: the admins of -admin (the first is
// you), a user @mallory who is not one, the basic group "ops", the
// supergroup "ops-super", the forum "ops-forum" and the group "elsewhere"
// that the bot is not in (for guest queries). Then it runs the terminal
// chat (internal/faketg/termchat) on stdin: plain text is sent as the
// current user in the current chat (the private chat at first), and
// commands such as /group TEXT, /reply ID TEXT, /press MSGID DATA, /stop,
// /guest TEXT act as in Telegram (/help lists them). It prints what the
// bot does: new messages, edits
// (rewriting the message in place on a terminal), drafts, toasts, and
// files, which it saves under -files.
//
// Piped stdin works for scripts: /wait REGEX blocks until the bot shows
// matching text, /sleep DURATION pauses, and -exit-on-eof ends the program
// at the end of the input (otherwise it serves until interrupted).
//
// # In a cluster
//
// -control ADDR serves the control API (internal/faketg/control: HTTP and
// JSON under /v1, and GET /healthz for readiness), through which the
// end-to-end suite acts as users and reads what the bot did. -chat=false
// runs the fake as a server only: no terminal chat and no stdin; it
// serves until SIGTERM. A pod keeps its key in a Secret, made beforehand
// with the keygen subcommand, and loads it read-only with -key:
//
//	faketg keygen -key faketg.key.pem -pub faketg.pub.pem
//	faketg -chat=false -listen 0.0.0.0:8443 -advertise shelljob-faketg.shelljob-system.svc:8443 \
//	    -control 0.0.0.0:8080 -key /etc/faketg/faketg.key.pem -key-out "" -admin 1000001
//
// The bot gets the public key and the same address: -dc-addr
// shelljob-faketg.shelljob-system.svc:8443 -public-key faketg.pub.pem. A
// host name works both as the bot's -dc-addr and as -advertise, which the
// fake reports in help.getConfig and gotd dials after a reconnect: gotd
// resolves DC addresses with net.Dialer. Use a port that is the same on
// the Service and the container (or advertise the Service's port).
//
// -connect URL runs the terminal chat against a fake elsewhere, through
// its control API, instead of starting one: every command works as on a
// local fake, and the end of stdin (Ctrl-D) ends the chat, not the fake.
//
//	faketg -connect http://127.0.0.1:8080    # after kubectl port-forward svc/shelljob-faketg 8080
//
// -echo-bot runs a small echo bot against the fake, to try the chat alone.
package main

import (
	"context"
	"crypto/rsa"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/gotd/td/crypto"

	"shelljob.dev/shelljob/internal/faketg"
	"shelljob.dev/shelljob/internal/faketg/control"
	"shelljob.dev/shelljob/internal/faketg/echobot"
	"shelljob.dev/shelljob/internal/faketg/termchat"
)

type config struct {
	listen, advertise string
	token             string
	admins            string
	botUsername       string
	aliases           string
	keyOut, keyFile   string
	addrOut           string
	filesDir          string
	control           string
	connect           string
	chat              bool
	exitOnEOF         bool
	verbose           bool
	shortUpdates      bool
	echoBot           bool
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "keygen" {
		if err := keygen(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "faketg keygen:", err)
			os.Exit(1)
		}
		return
	}
	var c config
	flag.StringVar(&c.listen, "listen", "127.0.0.1:0", "TCP address to listen on")
	flag.StringVar(&c.advertise, "advertise", "", `DC address to report to the bot, "host:port"; the host may be a DNS name, port 0 is the listener's (default: the listen address)`)
	flag.StringVar(&c.token, "token", faketg.DefaultBotToken, "bot token the fake accepts")
	flag.StringVar(&c.admins, "admin", "1000001", "comma-separated user IDs of admins to create; the first is you")
	flag.StringVar(&c.botUsername, "bot-username", "shelljob_bot", "bot's primary username")
	flag.StringVar(&c.aliases, "bot-alias", "", "comma-separated active aliases of the bot")
	flag.StringVar(&c.keyOut, "key-out", "faketg.pub.pem", `where to write the server's public key (PEM); "" writes none`)
	flag.StringVar(&c.keyFile, "key", "", "private key file: loaded if it exists, else generated and written there (keeps the public key across restarts)")
	flag.StringVar(&c.addrOut, "addr-out", "", "also write the DC address to this file")
	flag.StringVar(&c.filesDir, "files", "faketg-files", "directory for files the bot sends")
	flag.StringVar(&c.control, "control", "", `serve the control API (HTTP) and /healthz on this address, e.g. "0.0.0.0:8080"`)
	flag.StringVar(&c.connect, "connect", "", "run the terminal chat against the fake whose control API is at this URL, instead of starting one")
	flag.BoolVar(&c.chat, "chat", true, "run the terminal chat on stdin; false serves only, until SIGTERM")
	flag.BoolVar(&c.exitOnEOF, "exit-on-eof", false, "exit at the end of stdin instead of serving until interrupted (always so with -connect)")
	flag.BoolVar(&c.verbose, "v", false, "print every call of the bot and the server's logs")
	flag.BoolVar(&c.shortUpdates, "short-updates", false, "deliver private text as updateShortMessage")
	flag.BoolVar(&c.echoBot, "echo-bot", false, "also run a small echo bot (internal/faketg/echobot) against the fake, to try it without the real bot")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c, os.Stdin, os.Stdout); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "faketg:", err)
		os.Exit(1)
	}
}

// keygen writes a fresh key pair: the private key for -key (a Secret) and
// the public key for the bot's -public-key.
func keygen(args []string) error {
	fs := flag.NewFlagSet("keygen", flag.ContinueOnError)
	priv := fs.String("key", "faketg.key.pem", "where to write the private key (PEM, mode 0600)")
	pub := fs.String("pub", "faketg.pub.pem", "where to write the public key (PEM)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	k, err := rsa.GenerateKey(crypto.DefaultRand(), crypto.RSAKeyBits)
	if err != nil {
		return err
	}
	s, err := faketg.New(faketg.Options{PrivateKey: k})
	if err != nil {
		return err
	}
	if err := os.WriteFile(*priv, s.PrivateKeyPEM(), 0o600); err != nil {
		return err
	}
	return os.WriteFile(*pub, s.PublicKeyPEM(), 0o644)
}

func run(ctx context.Context, c config, in io.Reader, out io.Writer) error {
	if c.connect != "" {
		return connect(ctx, c, in, out)
	}
	lvl := zapcore.WarnLevel
	if c.verbose {
		lvl = zapcore.DebugLevel
	}
	zcfg := zap.NewDevelopmentConfig()
	zcfg.Level = zap.NewAtomicLevelAt(lvl)
	zcfg.OutputPaths = []string{"stderr"}
	lg, err := zcfg.Build()
	if err != nil {
		return err
	}
	defer func() { _ = lg.Sync() }()

	opts := faketg.Options{
		Addr:         c.listen,
		Advertise:    c.advertise,
		BotToken:     c.token,
		Logger:       lg,
		ShortUpdates: c.shortUpdates,
		Bot:          faketg.BotOptions{Username: c.botUsername, NoUsername: c.botUsername == ""},
	}
	for _, a := range splitList(c.aliases) {
		opts.Bot.Aliases = append(opts.Bot.Aliases, faketg.Alias{Username: strings.TrimPrefix(a, "@"), Active: true})
	}
	if c.keyFile != "" {
		if k, err := faketg.LoadPrivateKey(c.keyFile); err == nil {
			opts.PrivateKey = k
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	s, err := faketg.New(opts)
	if err != nil {
		return err
	}
	if c.keyFile != "" && opts.PrivateKey == nil {
		if err := os.WriteFile(c.keyFile, s.PrivateKeyPEM(), 0o600); err != nil {
			return err
		}
	}
	admins, err := parseAdmins(c.admins)
	if err != nil {
		return err
	}
	termchat.NewWorld(s, admins)
	if err := s.Start(ctx); err != nil {
		return err
	}
	defer func() { _ = s.Close() }()
	if c.keyOut != "" {
		if err := os.WriteFile(c.keyOut, s.PublicKeyPEM(), 0o644); err != nil {
			return err
		}
	}
	if c.addrOut != "" {
		if err := os.WriteFile(c.addrOut, []byte(s.Addr()+"\n"), 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "faketg: DC %d at %s (listening on %s)\n", s.DC(), s.Addr(), s.ListenAddr())
	if c.keyOut != "" {
		fmt.Fprintf(out, "faketg: public key in %s; bot token %s; admins %v\n", c.keyOut, c.token, s.Admins())
	} else {
		fmt.Fprintf(out, "faketg: bot token %s; admins %v\n", c.token, s.Admins())
	}

	svc := control.NewService(s)
	if c.control != "" {
		ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", c.control)
		if err != nil {
			return fmt.Errorf("control: %w", err)
		}
		hs := &http.Server{Handler: svc.Handler(), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = hs.Serve(ln) }()
		// Close, not Shutdown: long-polls would hold a shutdown for minutes.
		defer func() { _ = hs.Close() }()
		fmt.Fprintf(out, "faketg: control API on http://%s\n", ln.Addr())
	}

	if c.echoBot {
		bctx, bcancel := context.WithCancel(ctx)
		botDone := make(chan struct{})
		go func() {
			defer close(botDone)
			err := echobot.Run(bctx, echobot.Config{Addr: s.Addr(), PublicKeyPEM: s.PublicKeyPEM(), DC: s.DC(), Token: c.token})
			if err != nil && bctx.Err() == nil {
				lg.Error("Echo bot stopped", zap.Error(err))
			}
		}()
		defer func() {
			bcancel()
			<-botDone
		}()
	}

	if !c.chat {
		<-ctx.Done()
		return ctx.Err()
	}
	ch := termchat.New(svc, c.chatOptions(), out)
	if _, err := ch.Setup(ctx); err != nil {
		return err
	}
	ch.Printf("faketg: type text to send it as %s in the private chat; /help for commands\n", ch.You(ctx))
	return ch.Run(ctx, in, c.exitOnEOF)
}

// connect runs the terminal chat against a remote fake until the end of
// in.
func connect(ctx context.Context, c config, in io.Reader, out io.Writer) error {
	ch := termchat.New(control.NewClient(c.connect, nil), c.chatOptions(), out)
	info, err := ch.Setup(ctx)
	if err != nil {
		return err
	}
	ch.Printf("faketg: DC %d at %s, through %s (bot @%s, connected: %v)\n", info.DC, info.DCAddr, c.connect, info.Bot.Username, info.Connected)
	ch.Printf("faketg: type text to send it as %s in the private chat; /help for commands; Ctrl-D ends the chat\n", ch.You(ctx))
	return ch.Run(ctx, in, true)
}

func (c config) chatOptions() termchat.Options {
	return termchat.Options{FilesDir: c.filesDir, Verbose: c.verbose}
}

// parseAdmins reads the comma-separated user IDs of -admin.
func parseAdmins(list string) ([]int64, error) {
	var ids []int64
	for _, a := range splitList(list) {
		id, err := strconv.ParseInt(a, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("admin %q: %w", a, err)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
