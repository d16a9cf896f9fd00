package termchat

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mattn/go-runewidth"
	"golang.org/x/term"

	"shelljob.dev/shelljob/internal/faketg/control"
)

// follow prints the bot's calls as they come.
func (c *Chat) follow(ctx context.Context) {
	// What the bot did before this chat started is history: /log shows it.
	seq := c.seq(ctx)
	for {
		evs, err := c.api.Events(ctx, control.EventsQuery{After: seq, Wait: 30 * time.Second})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			c.Printf("! %v\n", err)
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
func (c *Chat) catchUp(ctx context.Context) {
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

func (c *Chat) print(ctx context.Context, e control.Event) {
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
		if !c.opts.Verbose {
			return
		}
		text = fmt.Sprintf("bot typing%s: %s", where, e.Action)
	default:
		if !c.opts.Verbose && e.OK() {
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
func (c *Chat) rows(text string) int {
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
func (c *Chat) save(ctx context.Context, e control.Event) string {
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
	if err := os.MkdirAll(c.opts.FilesDir, 0o755); err != nil {
		return "(not saved: " + err.Error() + ")"
	}
	path := filepath.Join(c.opts.FilesDir, fmt.Sprintf("%d-%s", e.MsgID, filepath.Base(name)))
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return "(not saved: " + err.Error() + ")"
	}
	kind := "document"
	if e.Media.Photo {
		kind = "photo"
	}
	return fmt.Sprintf("%s %s (%s, %d bytes)", kind, path, e.Media.MIME, len(data))
}
