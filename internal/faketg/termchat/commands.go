package termchat

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"shelljob.dev/shelljob/internal/faketg/control"
)

// A command is one of the chat's slash commands.
type command struct {
	name string // "/group"
	args string // what follows it, for /help: "TEXT"
	what string // what it does, for /help
	// keepsMark: the command is no action of the user's, so a /wait after
	// it still looks for the bot's answers from the user's last action.
	keepsMark bool
	run       func(c *Chat, ctx context.Context, arg string) error
}

// commands is the chat's command table, in the order /help lists it.
func commands() []command {
	return []command{
		{name: "/group", args: "TEXT", what: `send in the basic group "ops"`, run: (*Chat).inGroup},
		{name: "/super", args: "TEXT", what: `send in the supergroup "ops-super"`, run: (*Chat).inSuper},
		{name: "/topic", args: "TEXT", what: `send in topic "builds" of the forum "ops-forum"`, run: (*Chat).inTopic},
		{name: "/private", args: "TEXT", what: "send in your private chat with the bot", run: (*Chat).inPrivate},
		{name: "/chat", args: "private|group|super|forum", what: "switch the current chat", run: (*Chat).switchChat},
		{name: "/as", args: "me|mallory|ID", what: "act as another user (mallory is not an admin)", run: (*Chat).as},
		{name: "/reply", args: "ID TEXT", what: "reply to message ID of the current chat", run: (*Chat).reply},
		{name: "/fwd", args: "TEXT", what: "send TEXT as a forwarded message", run: (*Chat).forward},
		{name: "/file", args: "PATH [TEXT]", what: "send a file as a document, with TEXT as caption", run: (*Chat).document},
		{name: "/photo", args: "PATH [TEXT]", what: "send a photo", run: (*Chat).photo},
		{name: "/press", args: "ID [DATA]", what: "press a button of message ID (default: its first callback button)", run: (*Chat).press},
		{name: "/stop", what: "press Stop on the bot's last draft in your private chat", run: (*Chat).stopDraft},
		{name: "/guest", args: "TEXT", what: `guest query from the chat "elsewhere" (the bot is not in it)`, run: (*Chat).guest},
		{name: "/fail", args: "METHOD N ERR", what: "fail the next N calls, e.g. /fail messages.editMessage 2 FLOOD_WAIT_3", run: (*Chat).fail},
		{name: "/delete", args: "ID", what: "delete message ID of the current chat (the bot's later edits fail)", run: (*Chat).delete},
		{name: "/msgs", what: "show the current chat's messages", run: (*Chat).messages},
		{name: "/log", what: "show every call of the bot", run: (*Chat).log},
		{name: "/wait", args: "REGEX [DUR]", what: "wait until the bot shows text matching REGEX (default 60s)", keepsMark: true, run: (*Chat).wait},
		{name: "/sleep", args: "DUR", what: "pause (scripts)", keepsMark: true, run: (*Chat).sleep},
		{name: "/waitbot", args: "[DUR]", what: "wait until the bot is connected (default 60s)", run: (*Chat).waitBot},
		{name: "/help", run: (*Chat).help},
	}
}

// help lists the commands: each with its arguments, and what it does in
// a column of its own.
func (c *Chat) help(context.Context, string) error {
	var b strings.Builder
	b.WriteString("Commands (TEXT alone is sent as you in the current chat):\n")
	for _, cmd := range c.cmds {
		usage := strings.TrimSpace(cmd.name + " " + cmd.args)
		if cmd.what == "" {
			fmt.Fprintf(&b, "  %s\n", usage)
			continue
		}
		fmt.Fprintf(&b, "  %-18s   %s\n", usage, cmd.what)
	}
	c.Printf("%s", b.String())
	return nil
}

func (c *Chat) inGroup(ctx context.Context, text string) error {
	return c.send(ctx, control.SendRequest{Chat: c.group, Text: text})
}

func (c *Chat) inSuper(ctx context.Context, text string) error {
	return c.send(ctx, control.SendRequest{Chat: c.super, Text: text})
}

func (c *Chat) inPrivate(ctx context.Context, text string) error {
	return c.send(ctx, control.SendRequest{Chat: c.me, Text: text})
}

func (c *Chat) inTopic(ctx context.Context, text string) error {
	if c.topic == 0 {
		t, err := c.findTopic(ctx)
		if err != nil {
			return err
		}
		c.topic = t
	}
	return c.send(ctx, control.SendRequest{Chat: c.forum, Topic: c.topic, Text: text})
}

// findTopic finds the topic "builds" of the forum, or makes it.
func (c *Chat) findTopic(ctx context.Context) (int, error) {
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

func (c *Chat) switchChat(ctx context.Context, arg string) error {
	switch strings.TrimSpace(arg) {
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
	c.Printf("now in %s\n", c.chatName(ctx, c.cur))
	return nil
}

// as makes you another user; in a private chat, you move to yours.
func (c *Chat) as(ctx context.Context, arg string) error {
	if err := c.becomeUser(ctx, strings.TrimSpace(arg)); err != nil {
		return err
	}
	if c.cur > 0 {
		c.cur = c.me
	}
	c.Printf("you are %s\n", c.userName(ctx, c.me))
	return nil
}

func (c *Chat) becomeUser(ctx context.Context, arg string) error {
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

func (c *Chat) reply(ctx context.Context, arg string) error {
	idStr, text, _ := strings.Cut(arg, " ")
	id, err := strconv.Atoi(idStr)
	if err != nil {
		return fmt.Errorf("usage: /reply ID TEXT")
	}
	return c.send(ctx, control.SendRequest{Chat: c.cur, ReplyTo: id, Text: text})
}

func (c *Chat) forward(ctx context.Context, text string) error {
	return c.send(ctx, control.SendRequest{Chat: c.cur, Forwarded: true, Text: text})
}

func (c *Chat) document(ctx context.Context, arg string) error {
	path, caption, _ := strings.Cut(arg, " ")
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return c.send(ctx, control.SendRequest{Chat: c.cur, Text: caption, Document: &control.Document{Name: filepath.Base(path), MIME: mimeOf(path), Data: data}})
}

func (c *Chat) photo(ctx context.Context, arg string) error {
	path, caption, _ := strings.Cut(arg, " ")
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return c.send(ctx, control.SendRequest{Chat: c.cur, Text: caption, Photo: data})
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

// pressTimeout bounds the wait for the bot's answer to a press.
const pressTimeout = 15 * time.Second

func (c *Chat) press(ctx context.Context, arg string) error {
	idStr, data, hasData := strings.Cut(strings.TrimSpace(arg), " ")
	id, err := strconv.Atoi(idStr)
	if err != nil {
		return fmt.Errorf("usage: /press MSGID [DATA]")
	}
	r := control.PressRequest{User: c.me, Chat: c.cur, MsgID: id}
	if hasData {
		r.Data = &data
	}
	pctx, cancel := context.WithTimeout(ctx, pressTimeout)
	defer cancel()
	ans, err := c.api.Press(pctx, r)
	if err != nil {
		return err
	}
	kind := "toast"
	if ans.Alert {
		kind = "alert"
	}
	c.Printf("🔔 %s for %q: %s\n", kind, ans.Data, ans.Text)
	return nil
}

func (c *Chat) stopDraft(ctx context.Context, _ string) error {
	d, err := c.api.StopDraft(ctx, control.StopDraftRequest{User: c.me})
	if err != nil {
		return err
	}
	c.Printf("⏹ pressed Stop on draft %d\n", d.RandomID)
	return nil
}

func (c *Chat) guest(ctx context.Context, text string) error {
	if c.outside == 0 {
		return fmt.Errorf("the fake has no chat without the bot")
	}
	q, err := c.api.Guest(ctx, control.GuestRequest{User: c.me, Chat: c.outside, Text: text})
	if err != nil {
		return err
	}
	c.Printf("you (guest query %d in %q): %s\n", q.QueryID, c.outsideTitle, text)
	return nil
}

func (c *Chat) fail(ctx context.Context, arg string) error {
	f := strings.Fields(arg)
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
	c.Printf("the next %d calls of %s fail with %s\n", n, f[0], f[2])
	return nil
}

func (c *Chat) delete(ctx context.Context, arg string) error {
	id, err := strconv.Atoi(strings.TrimSpace(arg))
	if err != nil {
		return fmt.Errorf("usage: /delete ID")
	}
	if err := c.api.Delete(ctx, control.DeleteRequest{Chat: c.cur, ID: id}); err != nil {
		return err
	}
	c.Printf("deleted #%d\n", id)
	return nil
}

func (c *Chat) messages(ctx context.Context, _ string) error {
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
		c.Printf("#%d %s%s: %s\n", m.ID, who, state, indent(m.Text))
	}
	return nil
}

func (c *Chat) log(ctx context.Context, _ string) error {
	evs, err := c.api.Events(ctx, control.EventsQuery{})
	if err != nil {
		return err
	}
	for _, e := range evs.Events {
		c.Printf("%s\n", e.Summary)
	}
	return nil
}

func (c *Chat) sleep(ctx context.Context, arg string) error {
	d, err := time.ParseDuration(strings.TrimSpace(arg))
	if err != nil {
		return err
	}
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// defaultWait bounds /wait and /waitbot without a duration.
const defaultWait = time.Minute

func (c *Chat) wait(ctx context.Context, arg string) error {
	f := strings.Fields(arg)
	if len(f) == 0 {
		return fmt.Errorf("usage: /wait REGEX [DURATION]")
	}
	d := defaultWait
	pattern := strings.TrimSpace(arg)
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

func (c *Chat) waitBot(ctx context.Context, arg string) error {
	d := defaultWait
	if v := strings.TrimSpace(arg); v != "" {
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
	c.Printf("the bot is connected\n")
	return nil
}
