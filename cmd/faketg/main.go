// Command faketg runs a fake Telegram (internal/faketg) for the shelljob bot
// and lets you chat with the bot from the terminal.
//
// It listens on -listen, prints the DC address and writes the server's
// public key to -key-out, which is all the bot needs besides the token
// (-token). Then it reads lines from stdin: plain text is sent as the
// current user (the first admin) in the current chat (the private chat at
// first), and commands such as /group TEXT, /reply ID TEXT, /press MSGID
// DATA, /stop, /guest TEXT act as in Telegram (/help lists them). It
// prints what the bot does: new messages, edits (rewriting the message in
// place on a terminal), drafts, toasts, and files, which it saves under
// -files.
//
// Piped stdin works for scripts: /wait REGEX blocks until the bot shows
// matching text, /sleep DURATION pauses, and -exit-on-eof ends the program
// at the end of the input (otherwise it serves until interrupted).
//
// For a bot in a kind pod, listen on all interfaces and advertise the
// address the pod reaches, and keep the key across restarts:
//
//	faketg -listen 0.0.0.0:8443 -advertise 172.18.0.1:8443 -key faketg.key.pem -key-out faketg.pub.pem -admin 1000001
//
// -echo-bot runs a small echo bot against the fake, to try the chat alone.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"shelljob.dev/shelljob/internal/faketg"
	"shelljob.dev/shelljob/internal/faketg/echobot"
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
	exitOnEOF         bool
	verbose           bool
	shortUpdates      bool
	echoBot           bool
}

func main() {
	var c config
	flag.StringVar(&c.listen, "listen", "127.0.0.1:0", "TCP address to listen on")
	flag.StringVar(&c.advertise, "advertise", "", `DC address to report to the bot, "host:port" (default: the listen address)`)
	flag.StringVar(&c.token, "token", faketg.DefaultBotToken, "bot token the fake accepts")
	flag.StringVar(&c.admins, "admin", "1000001", "comma-separated user IDs of admins to create; the first is you")
	flag.StringVar(&c.botUsername, "bot-username", "shelljob_bot", "bot's primary username")
	flag.StringVar(&c.aliases, "bot-alias", "", "comma-separated active aliases of the bot")
	flag.StringVar(&c.keyOut, "key-out", "faketg.pub.pem", "where to write the server's public key (PEM)")
	flag.StringVar(&c.keyFile, "key", "", "private key file: loaded if it exists, else generated and written there (keeps the public key across restarts)")
	flag.StringVar(&c.addrOut, "addr-out", "", "also write the DC address to this file")
	flag.StringVar(&c.filesDir, "files", "faketg-files", "directory for files the bot sends")
	flag.BoolVar(&c.exitOnEOF, "exit-on-eof", false, "exit at the end of stdin instead of serving until interrupted")
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

func run(ctx context.Context, c config, in io.Reader, out io.Writer) error {
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
	if err := s.Start(ctx); err != nil {
		return err
	}
	defer func() { _ = s.Close() }()
	if err := os.WriteFile(c.keyOut, s.PublicKeyPEM(), 0o644); err != nil {
		return err
	}
	if c.addrOut != "" {
		if err := os.WriteFile(c.addrOut, []byte(s.Addr()+"\n"), 0o644); err != nil {
			return err
		}
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

	ch := newChat(s, c, out)
	if err := ch.setup(); err != nil {
		return err
	}
	ch.printf("faketg: DC %d at %s (listening on %s)\n", s.DC(), s.Addr(), s.ListenAddr())
	ch.printf("faketg: public key in %s; bot token %s; admins %v\n", c.keyOut, c.token, s.Admins())
	ch.printf("faketg: type text to send it as %s in the private chat; /help for commands\n", ch.me)

	printDone := make(chan struct{})
	pctx, pcancel := context.WithCancel(ctx)
	go func() {
		defer close(printDone)
		ch.follow(pctx)
	}()
	defer func() {
		pcancel()
		<-printDone
	}()

	lines := make(chan string)
	readErr := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
		readErr <- sc.Err()
	}()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-readErr:
			if err != nil {
				return err
			}
			if c.exitOnEOF {
				ch.catchUp(ctx)
				return nil
			}
			<-ctx.Done()
			return ctx.Err()
		case line := <-lines:
			if err := ch.command(ctx, line); err != nil {
				ch.printf("! %v\n", err)
			}
		}
	}
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

// chat is the terminal side: the current user and chat, and the printer.
type chat struct {
	s   *faketg.Server
	cfg config
	tty bool

	mu  sync.Mutex
	out io.Writer
	// last is what the printer printed last, for rewriting it in place.
	lastKey   string
	lastLines int

	me      *faketg.User
	mallory *faketg.User
	cur     *faketg.Chat
	group   *faketg.Chat
	super   *faketg.Chat
	forum   *faketg.Chat
	topic   *faketg.Topic
	outside *faketg.Chat
	mark    int // the log's length at the user's last action

	printed   int           // events printed so far; guarded by mu
	printedCh chan struct{} // closed and replaced when printed grows
}

func newChat(s *faketg.Server, c config, out io.Writer) *chat {
	tty := false
	if f, ok := out.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	return &chat{s: s, cfg: c, out: out, tty: tty, printedCh: make(chan struct{})}
}

func (c *chat) setup() error {
	for i, a := range splitList(c.cfg.admins) {
		id, err := strconv.ParseInt(a, 10, 64)
		if err != nil {
			return fmt.Errorf("admin %q: %w", a, err)
		}
		u := c.s.NewUser(faketg.UserOptions{ID: id, FirstName: fmt.Sprintf("Admin%d", i+1), Username: fmt.Sprintf("admin%d", i+1), Admin: true})
		if c.me == nil {
			c.me = u
		}
	}
	c.mallory = c.s.NewUser(faketg.UserOptions{FirstName: "Mallory", Username: "mallory"})
	if c.me == nil {
		c.me = c.mallory
	}
	c.cur = c.me.Private()
	c.group = c.s.NewGroup("ops")
	c.super = c.s.NewSupergroup("ops-super")
	c.forum = c.s.NewForum("ops-forum")
	c.outside = c.s.NewChat(faketg.Group, faketg.ChatOptions{Title: "elsewhere", NoBot: true})
	return nil
}

func (c *chat) printf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastKey = ""
	fmt.Fprintf(c.out, format, args...)
}

const help = `Commands (TEXT alone is sent as you in the current chat):
  /group TEXT          send in the basic group "ops"
  /super TEXT          send in the supergroup "ops-super"
  /topic TEXT          send in topic "builds" of the forum "ops-forum"
  /private TEXT        send in your private chat with the bot
  /chat private|group|super|forum   switch the current chat
  /as me|mallory|ID    act as another user (mallory is not an admin)
  /reply ID TEXT       reply to message ID of the current chat
  /fwd TEXT            send TEXT as a forwarded message
  /file PATH [TEXT]    send a file as a document, with TEXT as caption
  /photo PATH [TEXT]   send a photo
  /press ID [DATA]     press a button of message ID (default: its first callback button)
  /stop                press Stop on the bot's last draft in your private chat
  /guest TEXT          guest query from the chat "elsewhere" (the bot is not in it)
  /fail METHOD N ERR   fail the next N calls, e.g. /fail messages.editMessage 2 FLOOD_WAIT_3
  /delete ID           delete message ID of the current chat (the bot's later edits fail)
  /msgs                show the current chat's messages
  /log                 show every call of the bot
  /wait REGEX [DUR]    wait until the bot shows text matching REGEX (default 60s)
  /sleep DUR           pause (scripts)
  /waitbot [DUR]       wait until the bot is connected (default 60s)
  /help
`

func (c *chat) command(ctx context.Context, line string) error {
	if strings.TrimSpace(line) == "" {
		return nil
	}
	c.catchUp(ctx)
	defer c.catchUp(ctx)
	if !strings.HasPrefix(line, "/") || strings.HasPrefix(line, "//") {
		c.mark = c.s.Seq()
		return c.send(ctx, c.me.In(c.cur), strings.TrimPrefix(line, "/"))
	}
	cmd, rest, _ := strings.Cut(line, " ")
	if cmd != "/wait" && cmd != "/sleep" {
		c.mark = c.s.Seq()
	}
	switch cmd {
	case "/help":
		c.printf("%s", help)
	case "/group":
		return c.send(ctx, c.me.In(c.group), rest)
	case "/super":
		return c.send(ctx, c.me.In(c.super), rest)
	case "/private":
		return c.send(ctx, c.me.In(c.me.Private()), rest)
	case "/topic":
		if c.topic == nil {
			t, err := c.forum.NewTopic(ctx, "builds")
			if err != nil {
				return err
			}
			c.topic = t
		}
		return c.send(ctx, c.me.In(c.forum).Topic(c.topic.ID), rest)
	case "/chat":
		switch strings.TrimSpace(rest) {
		case "private":
			c.cur = c.me.Private()
		case "group":
			c.cur = c.group
		case "super":
			c.cur = c.super
		case "forum":
			c.cur = c.forum
		default:
			return fmt.Errorf("usage: /chat private|group|super|forum")
		}
		c.printf("now in %s\n", c.cur)
	case "/as":
		arg := strings.TrimSpace(rest)
		switch arg {
		case "mallory":
			c.me = c.mallory
		case "me":
			ids := c.s.Admins()
			if len(ids) == 0 {
				return fmt.Errorf("no admin")
			}
			c.me, _ = c.s.User(ids[0])
		default:
			id, err := strconv.ParseInt(arg, 10, 64)
			if err != nil {
				return fmt.Errorf("usage: /as me|mallory|ID")
			}
			u, ok := c.s.User(id)
			if !ok {
				u = c.s.NewUser(faketg.UserOptions{ID: id})
			}
			c.me = u
		}
		if c.cur.Kind == faketg.Private {
			c.cur = c.me.Private()
		}
		c.printf("you are %s\n", c.me)
	case "/reply":
		idStr, text, _ := strings.Cut(rest, " ")
		id, err := strconv.Atoi(idStr)
		if err != nil {
			return fmt.Errorf("usage: /reply ID TEXT")
		}
		return c.send(ctx, c.me.In(c.cur).Reply(id), text)
	case "/fwd":
		return c.send(ctx, c.me.In(c.cur).Forwarded(nil), rest)
	case "/file", "/photo":
		path, caption, _ := strings.Cut(rest, " ")
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		b := c.me.In(c.cur)
		if cmd == "/photo" {
			b = b.Photo(data)
		} else {
			b = b.Document(filepath.Base(path), mimeOf(path), data)
		}
		return c.send(ctx, b, caption)
	case "/press":
		return c.press(ctx, rest)
	case "/stop":
		d, ok := c.lastDraft()
		if !ok {
			return fmt.Errorf("no draft in your private chat")
		}
		if err := c.me.StopDraft(ctx, d); err != nil {
			return err
		}
		c.printf("⏹ pressed Stop on draft %d\n", d.RandomID)
	case "/guest":
		q, err := c.me.Guest(ctx, c.outside, rest)
		if err != nil {
			return err
		}
		c.printf("you (guest query %d in %q): %s\n", q.ID, c.outside.Title, rest)
	case "/fail":
		f := strings.Fields(rest)
		if len(f) != 3 {
			return fmt.Errorf("usage: /fail METHOD N ERROR")
		}
		id, ok := faketg.MethodID(f[0])
		if !ok {
			return fmt.Errorf("unknown method %q", f[0])
		}
		n, err := strconv.Atoi(f[1])
		if err != nil {
			return err
		}
		c.s.FailNext(id, n, faketg.RPCError(f[2]))
		c.printf("the next %d calls of %s fail with %s\n", n, f[0], f[2])
	case "/delete":
		id, err := strconv.Atoi(strings.TrimSpace(rest))
		if err != nil {
			return fmt.Errorf("usage: /delete ID")
		}
		if !c.cur.Delete(id) {
			return fmt.Errorf("no message %d", id)
		}
		c.printf("deleted #%d\n", id)
	case "/msgs":
		for _, m := range c.cur.Messages() {
			who := "bot"
			if !m.Out && m.From != nil {
				who = m.From.String()
			}
			state := ""
			if m.Deleted {
				state = " (deleted)"
			} else if m.Edits > 0 {
				state = fmt.Sprintf(" (edited %d×)", m.Edits)
			}
			c.printf("#%d %s%s: %s\n", m.ID, who, state, indent(m.Text))
		}
	case "/log":
		c.printf("%s", c.s.Log())
	case "/sleep":
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		if err != nil {
			return err
		}
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return ctx.Err()
		}
	case "/wait":
		return c.wait(ctx, rest)
	case "/waitbot":
		d := time.Minute
		if v := strings.TrimSpace(rest); v != "" {
			var err error
			if d, err = time.ParseDuration(v); err != nil {
				return err
			}
		}
		wctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		if err := c.s.WaitConnected(wctx); err != nil {
			return err
		}
		c.printf("the bot is connected\n")
	default:
		return fmt.Errorf("unknown command %s; /help lists them", cmd)
	}
	return nil
}

func mimeOf(path string) string {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".txt", ".log":
		return "text/plain"
	case ".json":
		return "application/json"
	case ".jpg", ".jpeg":
		return "image/jpeg"
	case ".png":
		return "image/png"
	default:
		return "application/octet-stream"
	}
}

func (c *chat) send(ctx context.Context, b *faketg.SendBuilder, text string) error {
	m, err := b.Text(ctx, text)
	if err != nil {
		return err
	}
	extra := ""
	if m.ReplyTo != 0 {
		extra += fmt.Sprintf(" ↩%d", m.ReplyTo)
	}
	if m.Media != nil {
		extra += fmt.Sprintf(" [file %s, %d bytes]", m.Media.Filename, len(m.Media.Data))
	}
	c.printf("you #%d in %s%s: %s\n", m.ID, m.Chat, extra, indent(text))
	if !c.s.Connected() {
		c.printf("  (the bot is not connected: it gets this through updates.getDifference only if it kept its updates state)\n")
	}
	return nil
}

func (c *chat) press(ctx context.Context, rest string) error {
	idStr, data, hasData := strings.Cut(strings.TrimSpace(rest), " ")
	id, err := strconv.Atoi(idStr)
	if err != nil {
		return fmt.Errorf("usage: /press MSGID [DATA]")
	}
	if !hasData {
		m, ok := c.cur.Message(id)
		if !ok {
			return fmt.Errorf("no message %d in %s", id, c.cur)
		}
		found := false
		for _, row := range m.Buttons {
			for _, b := range row {
				if b.Type == "callback" && !found {
					data, found = string(b.Data), true
				}
			}
		}
		if !found {
			return fmt.Errorf("message %d has no callback button", id)
		}
	}
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	ans, err := c.me.Press(pctx, c.cur, id, []byte(data))
	if err != nil {
		return err
	}
	kind := "toast"
	if ans.Alert {
		kind = "alert"
	}
	c.printf("🔔 %s for %q: %s\n", kind, data, ans.Text)
	return nil
}

func (c *chat) lastDraft() (faketg.DraftInfo, bool) {
	l := c.s.Log().Of(faketg.Draft).In(c.me.Private()).OK()
	e, ok := l.Last()
	if !ok {
		return faketg.DraftInfo{}, false
	}
	return *e.Draft, true
}

func (c *chat) wait(ctx context.Context, rest string) error {
	f := strings.Fields(rest)
	if len(f) == 0 {
		return fmt.Errorf("usage: /wait REGEX [DURATION]")
	}
	d := time.Minute
	pattern := strings.TrimSpace(rest)
	if len(f) > 1 {
		if v, err := time.ParseDuration(f[len(f)-1]); err == nil {
			d = v
			pattern = strings.TrimSpace(strings.TrimSuffix(pattern, f[len(f)-1]))
		}
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	since := c.waitFrom()
	_, err = c.s.WaitEvent(wctx, since, func(e faketg.Event) bool {
		switch e.Kind {
		case faketg.Send, faketg.Edit, faketg.Draft, faketg.Upload, faketg.Toast, faketg.GuestResult, faketg.InlineEdit:
			return e.OK() && re.MatchString(e.Text)
		}
		return false
	})
	if err != nil {
		return fmt.Errorf("/wait %s: %w", pattern, context.Cause(wctx))
	}
	return nil
}

// waitFrom is where /wait starts looking: after the user's last action, so
// a /wait right after a message matches only the bot's answers to it.
func (c *chat) waitFrom() int { return c.mark }

func indent(s string) string {
	if !strings.Contains(s, "\n") {
		return s
	}
	return "\n    " + strings.ReplaceAll(s, "\n", "\n    ")
}

// follow prints the bot's calls as they come.
func (c *chat) follow(ctx context.Context) {
	seq := 0
	for {
		l, err := c.s.WaitFor(ctx, func(l faketg.Log) bool { return len(l) > seq })
		if err != nil {
			return
		}
		for _, e := range l[seq:] {
			c.print(e)
		}
		seq = len(l)
		c.mu.Lock()
		c.printed = seq
		close(c.printedCh)
		c.printedCh = make(chan struct{})
		c.mu.Unlock()
	}
}

// catchUp waits (briefly) until the printer has printed every call so far,
// so that a command's output comes after what the bot did before it.
func (c *chat) catchUp(ctx context.Context) {
	target := c.s.Seq()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	for {
		c.mu.Lock()
		done, ch := c.printed >= target, c.printedCh
		c.mu.Unlock()
		if done {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}

func (c *chat) print(e faketg.Event) {
	var (
		key   string // what the printed text shows, for rewriting in place
		text  string
		where = ""
	)
	if e.Chat != nil {
		where = " in " + e.Chat.String()
	}
	buttons := ""
	for _, row := range e.Buttons {
		for _, b := range row {
			buttons += fmt.Sprintf(" [%s → %s]", b.Text, b.Data)
		}
	}
	errText := ""
	if e.Err != nil {
		errText = " ✗ " + e.Err.Error()
	}
	switch e.Kind {
	case faketg.Send:
		key = fmt.Sprintf("msg:%p:%d", e.Chat, e.MsgID)
		reply := ""
		if e.ReplyTo != 0 {
			reply = fmt.Sprintf(" ↩%d", e.ReplyTo)
		}
		text = fmt.Sprintf("bot #%d%s%s%s: %s%s", e.MsgID, where, reply, errText, indent(e.Text), buttons)
	case faketg.Edit:
		key = fmt.Sprintf("msg:%p:%d", e.Chat, e.MsgID)
		text = fmt.Sprintf("bot #%d%s (edited)%s: %s%s", e.MsgID, where, errText, indent(e.Text), buttons)
		if e.Err != nil {
			key = ""
		}
	case faketg.Draft:
		key = fmt.Sprintf("draft:%p:%d", e.Chat, e.Draft.RandomID)
		stop := ""
		if e.Draft.CanStop {
			stop = " [⏹ Stop: /stop]"
		}
		text = fmt.Sprintf("bot draft %d%s%s: %s%s", e.Draft.RandomID, where, errText, indent(e.Text), stop)
		if e.Err != nil {
			key = ""
		}
	case faketg.Delete:
		text = fmt.Sprintf("bot deleted %v%s%s", e.MsgIDs, where, errText)
	case faketg.Upload:
		saved := ""
		if e.Media != nil && e.OK() {
			saved = c.save(e)
		}
		text = fmt.Sprintf("bot #%d%s sent a file%s: %s %s", e.MsgID, where, errText, saved, indent(e.Text))
	case faketg.Toast:
		text = fmt.Sprintf("bot answered the press%s: %q%s", where, e.Text, errText)
	case faketg.Commands:
		var names []string
		for _, cmd := range e.Commands {
			names = append(names, "/"+cmd.Command)
		}
		text = fmt.Sprintf("bot set its command menu: %s", strings.Join(names, " "))
	case faketg.GuestResult:
		key = fmt.Sprintf("guest:%d", e.QueryID)
		text = fmt.Sprintf("bot guest answer%s%s: %s%s", where, errText, indent(e.Text), buttons)
	case faketg.InlineEdit:
		key = fmt.Sprintf("guest:%d", e.QueryID)
		text = fmt.Sprintf("bot guest answer%s (edited)%s: %s%s", where, errText, indent(e.Text), buttons)
		if e.Err != nil {
			key = ""
		}
	case faketg.Unknown:
		text = fmt.Sprintf("!! the bot called %s, which the fake does not serve", e.Method)
	case faketg.Typing:
		if !c.cfg.verbose {
			return
		}
		text = fmt.Sprintf("bot typing%s: %T", where, e.Action)
	default:
		if !c.cfg.verbose && e.OK() {
			return
		}
		text = fmt.Sprintf("bot called %s%s", e.Method, errText)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tty && key != "" && key == c.lastKey && c.lastLines > 0 {
		// Rewrite the message in place: up to its first line, clear below.
		fmt.Fprintf(c.out, "\x1b[%dA\x1b[J", c.lastLines)
	}
	line := e.Time.Format("15:04:05.000") + " " + text
	fmt.Fprintln(c.out, line)
	c.lastKey = key
	c.lastLines = strings.Count(line, "\n") + 1
}

// save writes a file the bot sent under the files directory.
func (c *chat) save(e faketg.Event) string {
	name := e.Media.Filename
	if name == "" {
		name = "file"
		if e.Media.Photo {
			name = "photo.jpg"
		}
	}
	if err := os.MkdirAll(c.cfg.filesDir, 0o755); err != nil {
		return "(not saved: " + err.Error() + ")"
	}
	path := filepath.Join(c.cfg.filesDir, fmt.Sprintf("%d-%s", e.MsgID, filepath.Base(name)))
	if err := os.WriteFile(path, e.Media.Data, 0o644); err != nil {
		return "(not saved: " + err.Error() + ")"
	}
	kind := "document"
	if e.Media.Photo {
		kind = "photo"
	}
	return fmt.Sprintf("%s %s (%s, %d bytes)", kind, path, e.Media.MIME, len(e.Media.Data))
}
