package termchat_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"shelljob.dev/shelljob/internal/faketg"
	"shelljob.dev/shelljob/internal/faketg/control"
	"shelljob.dev/shelljob/internal/faketg/termchat"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

// world is a fake with NewWorld's users and chats, and no bot.
type world struct {
	srv                 *faketg.Server
	admin, mallory      *faketg.User
	group, super, forum *faketg.Chat
	outside             *faketg.Chat
	dir                 string
}

func newWorld(t *testing.T) *world {
	srv := faketg.NewTest(t, faketg.Options{})
	termchat.NewWorld(srv, []int64{1000001})
	w := &world{srv: srv, dir: t.TempDir()}
	for _, u := range srv.Users() {
		switch u.Username {
		case "admin1":
			w.admin = u
		case "mallory":
			w.mallory = u
		}
	}
	for _, c := range srv.Chats() {
		switch {
		case c.Title == "ops":
			w.group = c
		case c.Title == "ops-super":
			w.super = c
		case c.Title == "ops-forum":
			w.forum = c
		case c.Title == "elsewhere":
			w.outside = c
		}
	}
	if w.admin == nil || w.mallory == nil || w.group == nil || w.super == nil || w.forum == nil || w.outside == nil || w.outside.BotMember {
		t.Fatalf("NewWorld made users %v and chats %v", srv.Users(), srv.Chats())
	}
	return w
}

// run runs lines in a new chat on w and returns what it printed.
func (w *world) run(t *testing.T, lines ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out utiltesting.SyncBuffer
	ch := termchat.New(control.NewService(w.srv), termchat.Options{FilesDir: filepath.Join(w.dir, "files")}, &out)
	if _, err := ch.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ch.Run(ctx, strings.NewReader(strings.Join(lines, "\n")+"\n"), true); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	return out.String()
}

// last is the last message of chat.
func last(t *testing.T, chat *faketg.Chat) faketg.Message {
	t.Helper()
	ms := chat.Messages()
	if len(ms) == 0 {
		t.Fatalf("no message in %s", chat)
	}
	return ms[len(ms)-1]
}

// Each command does what /help says, in the fake: the table's commands
// are tested one by one, with the line they print or the error they give.
func TestCommands(t *testing.T) {
	doc := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(doc, []byte("from the terminal\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		lines []string
		// want are lines of the output; check looks at the fake.
		want  []string
		check func(t *testing.T, w *world)
	}{
		"plain text": {
			lines: []string{"hello"},
			want:  []string{"you #1 in private:@admin1(1000001): hello", "(the bot is not connected"},
			check: func(t *testing.T, w *world) {
				if m := last(t, w.admin.Private()); m.Text != "hello" || m.From != w.admin {
					t.Errorf("message %+v", m)
				}
			},
		},
		"a leading // sends a slash": {
			lines: []string{"//help"},
			check: func(t *testing.T, w *world) {
				if m := last(t, w.admin.Private()); m.Text != "/help" {
					t.Errorf("message %q", m.Text)
				}
			},
		},
		"/group": {
			lines: []string{"/group hi group"},
			want:  []string{`in group:"ops"`},
			check: func(t *testing.T, w *world) {
				if m := last(t, w.group); m.Text != "hi group" {
					t.Errorf("message %q", m.Text)
				}
			},
		},
		"/super": {
			lines: []string{"/super hi super"},
			check: func(t *testing.T, w *world) {
				if m := last(t, w.super); m.Text != "hi super" {
					t.Errorf("message %q", m.Text)
				}
			},
		},
		"/topic makes the topic once": {
			lines: []string{"/topic one", "/topic two"},
			check: func(t *testing.T, w *world) {
				topics := w.forum.Topics()
				if len(topics) != 2 || topics[1].Title != "builds" {
					t.Fatalf("topics %v", topics)
				}
				if m := last(t, w.forum); m.Text != "two" || m.TopicID != topics[1].ID {
					t.Errorf("message %+v, want in topic %d", m, topics[1].ID)
				}
			},
		},
		"/chat then text, /private": {
			lines: []string{"/chat super", "in super", "/private in private", "/chat nowhere"},
			want:  []string{`now in supergroup:"ops-super"`, "! usage: /chat private|group|super|forum"},
			check: func(t *testing.T, w *world) {
				if m := last(t, w.super); m.Text != "in super" {
					t.Errorf("supergroup's message %q", m.Text)
				}
				if m := last(t, w.admin.Private()); m.Text != "in private" {
					t.Errorf("private message %q", m.Text)
				}
			},
		},
		"/as": {
			lines: []string{"/as mallory", "hi from mallory", "/as 1000009", "/as me", "/as nobody"},
			want:  []string{"you are @mallory(", "you are User1000009(1000009)", "you are @admin1(1000001)", "! usage: /as me|mallory|ID"},
			check: func(t *testing.T, w *world) {
				if m := last(t, w.mallory.Private()); m.Text != "hi from mallory" || m.From != w.mallory {
					t.Errorf("message %+v", m)
				}
				if _, ok := w.srv.User(1000009); !ok {
					t.Error("/as ID made no user")
				}
			},
		},
		"/reply": {
			lines: []string{"first", "/reply 1 second", "/reply x y"},
			want:  []string{"you #2 in private:@admin1(1000001) ↩1: second", "! usage: /reply ID TEXT"},
			check: func(t *testing.T, w *world) {
				if m := last(t, w.admin.Private()); m.ReplyTo != 1 {
					t.Errorf("reply_to %d", m.ReplyTo)
				}
			},
		},
		"/fwd": {
			lines: []string{"/fwd passed on"},
			check: func(t *testing.T, w *world) {
				if m := last(t, w.admin.Private()); !m.Forwarded || m.Text != "passed on" {
					t.Errorf("message %+v", m)
				}
			},
		},
		"/file": {
			lines: []string{"/file " + doc + " the notes"},
			want:  []string{"[file notes.txt, 18 bytes]: the notes"},
			check: func(t *testing.T, w *world) {
				m := last(t, w.admin.Private())
				if m.Media == nil || m.Media.Photo || m.Media.Filename != "notes.txt" || m.Media.MIME != "text/plain" || string(m.Media.Data) != "from the terminal\n" {
					t.Errorf("media %+v", m.Media)
				}
			},
		},
		"/photo": {
			lines: []string{"/photo " + doc, "/photo /nonexistent"},
			want:  []string{"! open /nonexistent: no such file or directory"},
			check: func(t *testing.T, w *world) {
				if m := last(t, w.admin.Private()); m.Media == nil || !m.Media.Photo {
					t.Errorf("media %+v", m.Media)
				}
			},
		},
		"/delete": {
			lines: []string{"doomed", "/delete 1", "/delete x"},
			want:  []string{"deleted #1", "! usage: /delete ID"},
			check: func(t *testing.T, w *world) {
				if m := last(t, w.admin.Private()); !m.Deleted {
					t.Errorf("message %+v not deleted", m)
				}
			},
		},
		"/msgs": {
			lines: []string{"one", "two\nlines", "/delete 1", "/msgs"},
			want:  []string{"#1 @admin1(1000001) (deleted): one", "#2 @admin1(1000001): two"},
		},
		"/guest": {
			lines: []string{"/guest @shelljob_bot .a ls"},
			want:  []string{`in "elsewhere"): @shelljob_bot .a ls`},
			check: func(t *testing.T, w *world) {
				if m := last(t, w.outside); m.Text != "@shelljob_bot .a ls" || m.From != w.admin {
					t.Errorf("message %+v", m)
				}
			},
		},
		"/fail": {
			lines: []string{"/fail messages.editMessage 2 FLOOD_WAIT_3", "/fail messages.editMessage", "/fail no.suchMethod 1 FLOOD_WAIT_3"},
			want:  []string{"the next 2 calls of messages.editMessage fail with FLOOD_WAIT_3", "! usage: /fail METHOD N ERROR", "! faketg control: 400"},
		},
		"/press and /stop need a bot": {
			lines: []string{"/press x", "/stop"},
			want:  []string{"! usage: /press MSGID [DATA]", "! faketg control: 404"},
		},
		"/wait, /waitbot and /sleep": {
			lines: []string{"/wait ^never$ 30ms", "/waitbot 30ms", "/sleep 1ms", "/sleep soon", "/wait"},
			want:  []string{"! /wait ^never$: context deadline exceeded", "! wait for the bot: context deadline exceeded", `! time: invalid duration "soon"`, "! usage: /wait REGEX [DURATION]"},
		},
		"an unknown command": {
			lines: []string{"/bogus"},
			want:  []string{"! unknown command /bogus; /help lists them"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t)
			out := w.run(t, c.lines...)
			for _, want := range c.want {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q", want)
				}
			}
			if c.check != nil {
				c.check(t, w)
			}
			if t.Failed() {
				t.Logf("output:\n%s", out)
			}
		})
	}
}

// /help lists every command once, with what it takes, and the
// descriptions line up.
func TestHelp(t *testing.T) {
	out := newWorld(t).run(t, "/help")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	i := slices.IndexFunc(lines, func(l string) bool {
		return strings.HasSuffix(l, "Commands (TEXT alone is sent as you in the current chat):")
	})
	if i < 0 {
		t.Fatalf("no help in\n%s", out)
	}
	col := strings.Index(lines[i+1], "send in the basic group")
	for _, want := range []string{
		"/group TEXT", "/super TEXT", "/topic TEXT", "/private TEXT", "/chat private|group|super|forum", "/as me|mallory|ID",
		"/reply ID TEXT", "/fwd TEXT", "/file PATH [TEXT]", "/photo PATH [TEXT]", "/press ID [DATA]", "/stop", "/guest TEXT",
		"/fail METHOD N ERR", "/delete ID", "/msgs", "/log", "/wait REGEX [DUR]", "/sleep DUR", "/waitbot [DUR]", "/help",
	} {
		i++
		if i >= len(lines) || !strings.HasPrefix(lines[i], "  "+want) {
			t.Fatalf("help line %q, want %q\n%s", lines[min(i, len(lines)-1)], want, out)
		}
		if rest := strings.TrimPrefix(lines[i], "  "+want); rest != "" && len(want) <= 18 && strings.Index(lines[i], strings.TrimSpace(rest)) != col {
			t.Errorf("help line %q: its description is not in column %d", lines[i], col)
		}
	}
}
