package termchat

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"

	"shelljob.dev/shelljob/internal/faketg/control"
)

// Options configure a Chat.
type Options struct {
	// FilesDir is where the files the bot sends are saved.
	FilesDir string
	// Verbose prints every call of the bot, typing and the calls that
	// succeeded without a message included.
	Verbose bool
}

// Chat is the terminal side: the current user and chat, the commands, and
// the printer of the bot's calls.
type Chat struct {
	api  control.API
	opts Options
	tty  bool
	cmds []command

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

// New returns a chat that acts through api and prints to out.
func New(api control.API, opts Options, out io.Writer) *Chat {
	tty := false
	if f, ok := out.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	return &Chat{api: api, opts: opts, out: out, tty: tty, cmds: commands(), userNames: map[int64]string{}, chatNames: map[int64]string{}, printedCh: make(chan struct{})}
}

// Setup finds the users and chats of the fake's world (NewWorld): you are
// its first admin, in your private chat with the bot.
func (c *Chat) Setup(ctx context.Context) (control.Info, error) {
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

// You is how the current user is printed.
func (c *Chat) You(ctx context.Context) string { return c.userName(ctx, c.me) }

// info reads the fake's Info and remembers its names.
func (c *Chat) info(ctx context.Context) (control.Info, error) {
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
func (c *Chat) name(ctx context.Context, names map[int64]string, id int64) string {
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

func (c *Chat) chatName(ctx context.Context, id int64) string { return c.name(ctx, c.chatNames, id) }

func (c *Chat) userName(ctx context.Context, id int64) string { return c.name(ctx, c.userNames, id) }

// Printf prints a line of the chat's own.
func (c *Chat) Printf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastKey = ""
	fmt.Fprintf(c.out, format, args...)
}

// Run reads commands from in until it ends (then, with exitOnEOF, it
// returns nil, else it waits for ctx) or ctx ends. It prints the bot's
// calls meanwhile.
func (c *Chat) Run(ctx context.Context, in io.Reader, exitOnEOF bool) error {
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
			if err := c.Do(ctx, line); err != nil {
				c.Printf("! %v\n", err)
			}
		}
	}
}

// Do runs one line: plain text is sent as you in the current chat (a
// leading "//" sends a text that starts with "/"), a line that starts
// with "/" is a command.
func (c *Chat) Do(ctx context.Context, line string) error {
	if strings.TrimSpace(line) == "" {
		return nil
	}
	c.catchUp(ctx)
	defer c.catchUp(ctx)
	if !strings.HasPrefix(line, "/") || strings.HasPrefix(line, "//") {
		c.mark = c.seq(ctx)
		return c.send(ctx, control.SendRequest{Chat: c.cur, Text: strings.TrimPrefix(line, "/")})
	}
	name, arg, _ := strings.Cut(line, " ")
	cmd, ok := c.command(name)
	if !ok || !cmd.keepsMark {
		c.mark = c.seq(ctx)
	}
	if !ok {
		return fmt.Errorf("unknown command %s; /help lists them", name)
	}
	return cmd.run(c, ctx, arg)
}

func (c *Chat) command(name string) (command, bool) {
	for _, cmd := range c.cmds {
		if cmd.name == name {
			return cmd, true
		}
	}
	return command{}, false
}

// seq is the sequence number of the bot's last call so far.
func (c *Chat) seq(ctx context.Context) int {
	info, err := c.api.Info(ctx)
	if err != nil {
		return c.mark
	}
	return info.Seq
}

// send sends r as you and prints the message.
func (c *Chat) send(ctx context.Context, r control.SendRequest) error {
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
	c.Printf("you #%d in %s%s: %s\n", m.ID, c.chatName(ctx, m.Chat), extra, indent(r.Text))
	if info, err := c.api.Info(ctx); err == nil && !info.Connected {
		c.Printf("  (the bot is not connected: it gets this through updates.getDifference only if it kept its updates state)\n")
	}
	return nil
}

func indent(s string) string {
	if !strings.Contains(s, "\n") {
		return s
	}
	return "\n    " + strings.ReplaceAll(s, "\n", "\n    ")
}
