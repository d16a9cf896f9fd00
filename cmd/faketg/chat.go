package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mattn/go-runewidth"
	"golang.org/x/term"

	"shelljob.dev/shelljob/internal/faketg/control"
)

// The chats the fake's world has (newWorld) and the terminal chat uses.
const (
	groupTitle   = "ops"
	superTitle   = "ops-super"
	forumTitle   = "ops-forum"
	outsideTitle = "elsewhere"
	topicTitle   = "builds"
	malloryName  = "mallory"
)

// chat is the terminal side: the current user and chat, and the printer.
// It acts through the control API, on a fake in this process or a remote
// one alike.
type chat struct {
	api control.API
	cfg config
	tty bool

	mu  sync.Mutex
	out io.Writer
	// last is what the printer printed last, for rewriting it in place.
	lastKey   string
	lastLines int
	userNames map[int64]string // guarded by mu
	chatNames map[int64]string // guarded by mu

	me, mallory                  int64 // user IDs
	cur                          int64 // chat ID
	group, super, forum, outside int64
	outsideTitle                 string
	topic                        int
	mark                         int // the log's length at the user's last action

	printed   int           // events printed so far; guarded by mu
	printedCh chan struct{} // closed and replaced when printed grows
}

func newChat(api control.API, c config, out io.Writer) *chat {
	tty := false
	if f, ok := out.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	return &chat{api: api, cfg: c, out: out, tty: tty, userNames: map[int64]string{}, chatNames: map[int64]string{}, printedCh: make(chan struct{})}
}

// setup finds the users and chats of the fake's world.
func (c *chat) setup(ctx context.Context) (control.Info, error) {
	info, err := c.info(ctx)
	if err != nil {
		return info, err
	}
	for _, u := range info.Users {
		if u.Admin && c.me == 0 {
			c.me = u.ID
		}
		if u.Username == malloryName {
			c.mallory = u.ID
		}
	}
	if c.me == 0 {
		c.me = c.mallory
	}
	if c.me == 0 {
		return info, fmt.Errorf("the fake has no admin and no @%s", malloryName)
	}
	c.cur = c.me
	for _, ch := range info.Chats {
		switch {
		case ch.Kind == "group" && ch.Title == groupTitle && c.group == 0:
			c.group = ch.ID
		case ch.Kind == "supergroup" && ch.Title == superTitle && c.super == 0:
			c.super = ch.ID
		case ch.Kind == "forum" && ch.Title == forumTitle && c.forum == 0:
			c.forum = ch.ID
		case !ch.BotMember && c.outside == 0:
			c.outside, c.outsideTitle = ch.ID, ch.Title
		}
	}
	return info, nil
}

// info reads the fake's Info and remembers its names.
func (c *chat) info(ctx context.Context) (control.Info, error) {
	info, err := c.api.Info(ctx)
	if err != nil {
		return info, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, u := range info.Users {
		c.userNames[u.ID] = u.Name
	}
	for _, ch := range info.Chats {
		c.chatNames[ch.ID] = ch.Name
	}
	return info, nil
}

// name is how a user (from names c.userNames) or a chat (c.chatNames) is
// printed; an unknown ID reads the fake's Info again.
func (c *chat) name(ctx context.Context, names map[int64]string, id int64) string {
	c.mu.Lock()
	n, ok := names[id]
	c.mu.Unlock()
	if !ok {
		_, _ = c.info(ctx)
		c.mu.Lock()
		n, ok = names[id]
		c.mu.Unlock()
	}
	if !ok {
		return strconv.FormatInt(id, 10)
	}
	return n
}

func (c *chat) chatName(ctx context.Context, id int64) string { return c.name(ctx, c.chatNames, id) }

func (c *chat) userName(ctx context.Context, id int64) string { return c.name(ctx, c.userNames, id) }

func (c *chat) printf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastKey = ""
	fmt.Fprintf(c.out, format, args...)
}

// run reads commands from in until it ends (then, with exitOnEOF, it
// returns nil, else it waits for ctx) or ctx ends. It prints the bot's
// calls meanwhile.
func (c *chat) run(ctx context.Context, in io.Reader, exitOnEOF bool) error {
	printDone := make(chan struct{})
	pctx, pcancel := context.WithCancel(ctx)
	go func() {
		defer close(printDone)
		c.follow(pctx)
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
			if exitOnEOF {
				c.catchUp(ctx)
				return nil
			}
			<-ctx.Done()
			return ctx.Err()
		case line := <-lines:
			// The terminal echoed the line: what was printed last is no
			// longer right above the cursor.
			c.mu.Lock()
			c.lastKey = ""
			c.mu.Unlock()
			if err := c.command(ctx, line); err != nil {
				c.printf("! %v\n", err)
			}
		}
	}
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
		c.mark = c.seq(ctx)
		return c.send(ctx, control.SendRequest{Chat: c.cur, Text: strings.TrimPrefix(line, "/")})
	}
	cmd, rest, _ := strings.Cut(line, " ")
	if cmd != "/wait" && cmd != "/sleep" {
		c.mark = c.seq(ctx)
	}
	switch cmd {
	case "/help":
		c.printf("%s", help)
	case "/group":
		return c.send(ctx, control.SendRequest{Chat: c.group, Text: rest})
	case "/super":
		return c.send(ctx, control.SendRequest{Chat: c.super, Text: rest})
	case "/private":
		return c.send(ctx, control.SendRequest{Chat: c.me, Text: rest})
	case "/topic":
		if c.topic == 0 {
			t, err := c.findTopic(ctx)
			if err != nil {
				return err
			}
			c.topic = t
		}
		return c.send(ctx, control.SendRequest{Chat: c.forum, Topic: c.topic, Text: rest})
	case "/chat":
		switch strings.TrimSpace(rest) {
		case "private":
			c.cur = c.me
		case "group":
			c.cur = c.group
		case "super":
			c.cur = c.super
		case "forum":
			c.cur = c.forum
		default:
			return fmt.Errorf("usage: /chat private|group|super|forum")
		}
		c.printf("now in %s\n", c.chatName(ctx, c.cur))
	case "/as":
		if err := c.as(ctx, strings.TrimSpace(rest)); err != nil {
			return err
		}
		if c.cur > 0 {
			c.cur = c.me
		}
		c.printf("you are %s\n", c.userName(ctx, c.me))
	case "/reply":
		idStr, text, _ := strings.Cut(rest, " ")
		id, err := strconv.Atoi(idStr)
		if err != nil {
			return fmt.Errorf("usage: /reply ID TEXT")
		}
		return c.send(ctx, control.SendRequest{Chat: c.cur, ReplyTo: id, Text: text})
	case "/fwd":
		return c.send(ctx, control.SendRequest{Chat: c.cur, Forwarded: true, Text: rest})
	case "/file", "/photo":
		path, caption, _ := strings.Cut(rest, " ")
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		r := control.SendRequest{Chat: c.cur, Text: caption}
		if cmd == "/photo" {
			r.Photo = data
		} else {
			r.Document = &control.Document{Name: filepath.Base(path), MIME: mimeOf(path), Data: data}
		}
		return c.send(ctx, r)
	case "/press":
		return c.press(ctx, rest)
	case "/stop":
		d, err := c.api.StopDraft(ctx, control.StopDraftRequest{User: c.me})
		if err != nil {
			return err
		}
		c.printf("⏹ pressed Stop on draft %d\n", d.RandomID)
	case "/guest":
		if c.outside == 0 {
			return fmt.Errorf("the fake has no chat without the bot")
		}
		q, err := c.api.Guest(ctx, control.GuestRequest{User: c.me, Chat: c.outside, Text: rest})
		if err != nil {
			return err
		}
		c.printf("you (guest query %d in %q): %s\n", q.QueryID, c.outsideTitle, rest)
	case "/fail":
		f := strings.Fields(rest)
		if len(f) != 3 {
			return fmt.Errorf("usage: /fail METHOD N ERROR")
		}
		n, err := strconv.Atoi(f[1])
		if err != nil {
			return err
		}
		if err := c.api.Fail(ctx, control.FaultRequest{Method: f[0], N: n, Error: f[2]}); err != nil {
			return err
		}
		c.printf("the next %d calls of %s fail with %s\n", n, f[0], f[2])
	case "/delete":
		id, err := strconv.Atoi(strings.TrimSpace(rest))
		if err != nil {
			return fmt.Errorf("usage: /delete ID")
		}
		if err := c.api.Delete(ctx, control.DeleteRequest{Chat: c.cur, ID: id}); err != nil {
			return err
		}
		c.printf("deleted #%d\n", id)
	case "/msgs":
		ms, err := c.api.Messages(ctx, c.cur)
		if err != nil {
			return err
		}
		for _, m := range ms.Messages {
			who := "bot"
			if !m.Out && m.From != 0 {
				who = c.userName(ctx, m.From)
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
		evs, err := c.api.Events(ctx, control.EventsQuery{})
		if err != nil {
			return err
		}
		for _, e := range evs.Events {
			c.printf("%s\n", e.Summary)
		}
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
		if err := c.api.WaitConnected(wctx); err != nil {
			return err
		}
		c.printf("the bot is connected\n")
	default:
		return fmt.Errorf("unknown command %s; /help lists them", cmd)
	}
	return nil
}

// seq is the sequence number of the bot's last call so far.
func (c *chat) seq(ctx context.Context) int {
	info, err := c.api.Info(ctx)
	if err != nil {
		return c.mark
	}
	return info.Seq
}

func (c *chat) findTopic(ctx context.Context) (int, error) {
	if c.forum == 0 {
		return 0, fmt.Errorf("the fake has no forum %q", forumTitle)
	}
	info, err := c.info(ctx)
	if err != nil {
		return 0, err
	}
	for _, ch := range info.Chats {
		if ch.ID == c.forum {
			if i := slices.IndexFunc(ch.Topics, func(t control.Topic) bool { return t.Title == topicTitle }); i >= 0 {
				return ch.Topics[i].ID, nil
			}
		}
	}
	t, err := c.api.NewTopic(ctx, c.forum, control.TopicRequest{Title: topicTitle})
	return t.ID, err
}

func (c *chat) as(ctx context.Context, arg string) error {
	switch arg {
	case "mallory":
		if c.mallory == 0 {
			return fmt.Errorf("the fake has no @%s", malloryName)
		}
		c.me = c.mallory
		return nil
	case "me":
		info, err := c.info(ctx)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(info.Users, func(u control.User) bool { return u.Admin })
		if i < 0 {
			return fmt.Errorf("no admin")
		}
		c.me = info.Users[i].ID
		return nil
	}
	id, err := strconv.ParseInt(arg, 10, 64)
	if err != nil {
		return fmt.Errorf("usage: /as me|mallory|ID")
	}
	info, err := c.info(ctx)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(info.Users, func(u control.User) bool { return u.ID == id }) {
		if _, err := c.api.NewUser(ctx, control.UserRequest{ID: id}); err != nil {
			return err
		}
		if _, err := c.info(ctx); err != nil {
			return err
		}
	}
	c.me = id
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

func (c *chat) send(ctx context.Context, r control.SendRequest) error {
	if r.Chat == 0 {
		return fmt.Errorf("the fake has no such chat")
	}
	r.User = c.me
	m, err := c.api.Send(ctx, r)
	if err != nil {
		return err
	}
	extra := ""
	if m.ReplyTo != 0 {
		extra += fmt.Sprintf(" ↩%d", m.ReplyTo)
	}
	if m.Media != nil {
		extra += fmt.Sprintf(" [file %s, %d bytes]", m.Media.Name, m.Media.Size)
	}
	c.printf("you #%d in %s%s: %s\n", m.ID, c.chatName(ctx, m.Chat), extra, indent(r.Text))
	if info, err := c.api.Info(ctx); err == nil && !info.Connected {
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
	r := control.PressRequest{User: c.me, Chat: c.cur, MsgID: id}
	if hasData {
		r.Data = &data
	}
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	ans, err := c.api.Press(pctx, r)
	if err != nil {
		return err
	}
	kind := "toast"
	if ans.Alert {
		kind = "alert"
	}
	c.printf("🔔 %s for %q: %s\n", kind, ans.Data, ans.Text)
	return nil
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
	// From the user's last action, so a /wait right after a message
	// matches only the bot's answers to it.
	_, err = control.WaitEvent(wctx, c.api, c.mark, func(e control.Event) bool {
		switch e.Kind {
		case "send", "edit", "draft", "upload", "toast", "guest_result", "inline_edit":
			return e.OK() && re.MatchString(e.Text)
		}
		return false
	})
	if err != nil {
		return fmt.Errorf("/wait %s: %w", pattern, context.Cause(wctx))
	}
	return nil
}

func indent(s string) string {
	if !strings.Contains(s, "\n") {
		return s
	}
	return "\n    " + strings.ReplaceAll(s, "\n", "\n    ")
}

// follow prints the bot's calls as they come.
func (c *chat) follow(ctx context.Context) {
	// What the bot did before this chat started is history: /log shows it.
	seq := c.seq(ctx)
	for {
		evs, err := c.api.Events(ctx, control.EventsQuery{After: seq, Wait: 30 * time.Second})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			c.printf("! %v\n", err)
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
				return
			}
			continue
		}
		for _, e := range evs.Events {
			c.print(ctx, e)
		}
		seq = evs.Last
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
	target := c.seq(ctx)
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

func (c *chat) print(ctx context.Context, e control.Event) {
	var (
		key   string // what the printed text shows, for rewriting in place
		text  string
		where = ""
	)
	if e.Chat != 0 {
		where = " in " + c.chatName(ctx, e.Chat)
	}
	buttons := ""
	for _, row := range e.Buttons {
		for _, b := range row {
			buttons += fmt.Sprintf(" [%s → %s]", b.Text, b.Data)
		}
	}
	errText := ""
	if e.Error != nil {
		errText = " ✗ " + e.Error.Message
	}
	switch e.Kind {
	case "send":
		key = fmt.Sprintf("msg:%d:%d", e.Chat, e.MsgID)
		reply := ""
		if e.ReplyTo != 0 {
			reply = fmt.Sprintf(" ↩%d", e.ReplyTo)
		}
		text = fmt.Sprintf("bot #%d%s%s%s: %s%s", e.MsgID, where, reply, errText, indent(e.Text), buttons)
	case "edit":
		key = fmt.Sprintf("msg:%d:%d", e.Chat, e.MsgID)
		text = fmt.Sprintf("bot #%d%s (edited)%s: %s%s", e.MsgID, where, errText, indent(e.Text), buttons)
		if !e.OK() {
			key = ""
		}
	case "draft":
		key = fmt.Sprintf("draft:%d:%d", e.Chat, e.Draft.RandomID)
		stop := ""
		if e.Draft.CanStop {
			stop = " [⏹ Stop: /stop]"
		}
		text = fmt.Sprintf("bot draft %d%s%s: %s%s", e.Draft.RandomID, where, errText, indent(e.Text), stop)
		if !e.OK() {
			key = ""
		}
	case "delete":
		text = fmt.Sprintf("bot deleted %v%s%s", e.MsgIDs, where, errText)
	case "upload":
		saved := ""
		if e.Media != nil && e.OK() {
			saved = c.save(ctx, e)
		}
		text = fmt.Sprintf("bot #%d%s sent a file%s: %s %s", e.MsgID, where, errText, saved, indent(e.Text))
	case "toast":
		text = fmt.Sprintf("bot answered the press%s: %q%s", where, e.Text, errText)
	case "commands":
		var names []string
		for _, cmd := range e.Commands {
			names = append(names, "/"+cmd.Command)
		}
		text = fmt.Sprintf("bot set its command menu: %s", strings.Join(names, " "))
	case "guest_result":
		key = fmt.Sprintf("guest:%d", e.QueryID)
		text = fmt.Sprintf("bot guest answer%s%s: %s%s", where, errText, indent(e.Text), buttons)
	case "inline_edit":
		key = fmt.Sprintf("guest:%d", e.QueryID)
		text = fmt.Sprintf("bot guest answer%s (edited)%s: %s%s", where, errText, indent(e.Text), buttons)
		if !e.OK() {
			key = ""
		}
	case "unknown":
		text = fmt.Sprintf("!! the bot called %s, which the fake does not serve", e.Method)
	case "typing":
		if !c.cfg.verbose {
			return
		}
		text = fmt.Sprintf("bot typing%s: %s", where, e.Action)
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
	line := e.Time.Local().Format("15:04:05.000") + " " + text
	fmt.Fprintln(c.out, line)
	c.lastKey = key
	c.lastLines = c.rows(line)
}

// rows is how many terminal rows text takes: a line wider than the
// terminal wraps onto more.
func (c *chat) rows(text string) int {
	width := 0
	if f, ok := c.out.(*os.File); ok && c.tty {
		width, _, _ = term.GetSize(int(f.Fd()))
	}
	n := 0
	for _, line := range strings.Split(text, "\n") {
		w := runewidth.StringWidth(line)
		if width <= 0 || w <= width {
			n++
			continue
		}
		n += (w + width - 1) / width
	}
	return n
}

// save writes a file the bot sent under the files directory.
func (c *chat) save(ctx context.Context, e control.Event) string {
	name := e.Media.Name
	if name == "" {
		name = "file"
		if e.Media.Photo {
			name = "photo.jpg"
		}
	}
	data, err := c.api.File(ctx, e.Media.ID)
	if err != nil {
		return "(not saved: " + err.Error() + ")"
	}
	if err := os.MkdirAll(c.cfg.filesDir, 0o755); err != nil {
		return "(not saved: " + err.Error() + ")"
	}
	path := filepath.Join(c.cfg.filesDir, fmt.Sprintf("%d-%s", e.MsgID, filepath.Base(name)))
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return "(not saved: " + err.Error() + ")"
	}
	kind := "document"
	if e.Media.Photo {
		kind = "photo"
	}
	return fmt.Sprintf("%s %s (%s, %d bytes)", kind, path, e.Media.MIME, len(data))
}
