package bot_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gotd/td/tg"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/bot"
	"shelljob.dev/shelljob/internal/faketg"
	"shelljob.dev/shelljob/internal/shelljob"
	"shelljob.dev/shelljob/internal/texts"
)

// countedFiles makes each ended job's status say files, in place of what
// the operator recorded (nil: as from an older agent), and counts the
// GetFiles calls.
type countedFiles struct {
	bot.Cluster
	files    *shellv1alpha1.ShellJobFiles
	getFiles atomic.Int32
}

func (c *countedFiles) Watch(ctx context.Context, name string, fn func(*shellv1alpha1.ShellJob)) error {
	return c.Cluster.Watch(ctx, name, func(j *shellv1alpha1.ShellJob) {
		if shelljob.IsFinished(j) {
			j = j.DeepCopy()
			j.Status.Files = c.files
		}
		fn(j)
	})
}

func (c *countedFiles) GetFiles(ctx context.Context, job string, w io.Writer) error {
	c.getFiles.Add(1)
	return c.Cluster.GetFiles(ctx, job, w)
}

// The bot asks for a job's files only when its status counts some, or
// counts none because its agent did not say.
func TestFilesFetchedOnlyIfAny(t *testing.T) {
	for name, tc := range map[string]struct {
		files *shellv1alpha1.ShellJobFiles
		calls int32
	}{
		"none":        {files: &shellv1alpha1.ShellJobFiles{}, calls: 0},
		"some":        {files: &shellv1alpha1.ShellJobFiles{Count: 1, Bytes: 5}, calls: 1},
		"older agent": {calls: 1},
	} {
		t.Run(name, func(t *testing.T) {
			counted := &countedFiles{files: tc.files}
			e := newEnv(t, envOptions{wrap: func(c bot.Cluster) bot.Cluster { counted.Cluster = c; return counted }})
			since := e.srv.Seq()
			command := ".a echo hi"
			if tc.calls > 0 {
				command += `; echo made > "$SHELLJOB_OUT/out.txt"`
			}
			m := e.send(e.admin, e.group, command)
			if ev := e.final(since, e.group, m.ID); ev.Text != "hi" {
				t.Errorf("final = %q", ev.Text)
			}
			e.annotated(jobOf(m), shellv1alpha1.AnnotationDelivered, "")
			if n := counted.getFiles.Load(); n != tc.calls {
				t.Errorf("%d GetFiles calls, want %d", n, tc.calls)
			}
			sj, err := e.cluster.Job(e.ctx, jobOf(m))
			if err != nil {
				t.Fatal(err)
			}
			if _, tried := sj.Annotations[shellv1alpha1.AnnotationFilesAttempted]; tried != (tc.calls > 0) {
				t.Errorf("files attempt recorded: %v, want %v", tried, tc.calls > 0)
			}
			var uploads int
			for _, ev := range e.srv.Log().After(since).Of(faketg.Upload) {
				if ev.Media != nil && ev.Media.Filename == "out.txt" {
					uploads++
				}
			}
			if want := int(tc.calls); uploads != want {
				t.Errorf("out.txt sent %d times, want %d", uploads, want)
			}
		})
	}
}

// A command sends at most OutCount files of $SHELLJOB_OUT, the first in
// name order, and a note counts the others; a file left out for its size
// is named and counts toward nothing. Each case waits for the note, then
// for the delivery mark, which follows the last upload.
func TestFilesCountCapped(t *testing.T) {
	for name, tc := range map[string]struct {
		files   bot.FileLimits
		command string
		sent    []string
		note    string
	}{
		"a small cap": {
			files:   bot.FileLimits{OutFile: 1 << 10, OutCount: 3},
			command: `head -c 2048 /dev/zero > a-big.bin; for i in {1..8}; do echo $i > f$i.txt; done`,
			sent:    []string{"f1.txt", "f2.txt", "f3.txt"},
			note:    texts.FilesNotSent([]string{texts.OutFileTooBig("a-big.bin", 2048, 1<<10)}, 0, 5, 3),
		},
		"the default cap": {
			command: `for i in {1001..1250}; do echo $i > $i.txt; done`,
			sent: func() []string {
				var names []string
				for i := 1001; i <= 1100; i++ {
					names = append(names, strconv.Itoa(i)+".txt")
				}
				return names
			}(),
			note: "⚠ 150 more files not sent: a command sends at most 100.",
		},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, envOptions{files: tc.files})
			since := e.srv.Seq()
			m := e.send(e.admin, e.group, `.a cd "$SHELLJOB_OUT"; `+tc.command)
			note := e.wait(since, "the note", func(ev faketg.Event) bool {
				return sendTo(e.group, m.ID)(ev) && strings.HasPrefix(ev.Text, "⚠")
			})
			if note.Text != tc.note {
				t.Errorf("note = %q, want %q", note.Text, tc.note)
			}
			e.annotated(jobOf(m), shellv1alpha1.AnnotationDelivered, "")
			var sent []string
			for _, ev := range e.srv.Log().After(since).Of(faketg.Upload) {
				if ev.Media != nil {
					sent = append(sent, ev.Media.Filename)
				}
			}
			if !slices.Equal(sent, tc.sent) {
				t.Errorf("sent %d files %q, want %d %q", len(sent), sent, len(tc.sent), tc.sent)
			}
		})
	}
}

// cutFiles cuts each job's files stream after its first n bytes with err,
// as a worker or a connection lost in the middle would.
type cutFiles struct {
	bot.Cluster
	n   int64
	err error
}

func (c *cutFiles) GetFiles(ctx context.Context, job string, w io.Writer) error {
	lw := &limitedWriter{w: w, left: c.n}
	if err := c.Cluster.GetFiles(ctx, job, lw); err != nil && !errors.Is(err, errLimit) {
		return err
	}
	return c.err
}

var errLimit = errors.New("limit reached")

type limitedWriter struct {
	w    io.Writer
	left int64
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > l.left {
		n, _ := l.w.Write(p[:l.left])
		l.left -= int64(n)
		return n, errLimit
	}
	n, err := l.w.Write(p)
	l.left -= int64(n)
	return n, err
}

// A file that Telegram refuses, and the files a cut stream never brought,
// are in the note with the reason: nothing of $SHELLJOB_OUT goes missing
// without a word.
func TestFilesNotAllSent(t *testing.T) {
	cut := errors.New("the worker went away")
	for name, tc := range map[string]struct {
		wrap   func(bot.Cluster) bot.Cluster
		refuse bool
		sent   []string
		inNote []string
	}{
		"refused by Telegram": {
			refuse: true,
			sent:   []string{"b.txt"},
			inNote: []string{"⚠ Not sent from $SHELLJOB_OUT:\n", texts.OutFileNotSent("a.txt", "Telegram: MEDIA_EMPTY")},
		},
		"stream cut": {
			// a.txt's header and block, then a part of b.txt's header.
			wrap:   func(c bot.Cluster) bot.Cluster { return &cutFiles{Cluster: c, n: 2*512 + 100, err: cut} },
			sent:   []string{"a.txt"},
			inNote: []string{"⚠ Not sent from $SHELLJOB_OUT:\n", "any files past those sent and listed: they could not be read (", cut.Error()},
		},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, envOptions{wrap: tc.wrap})
			if tc.refuse {
				e.srv.FailNext(tg.MessagesSendMediaRequestTypeID, 1, faketg.RPCError("MEDIA_EMPTY"))
			}
			since := e.srv.Seq()
			m := e.send(e.admin, e.group, `.a cd "$SHELLJOB_OUT"; echo a > a.txt; echo b > b.txt`)
			note := e.wait(since, "the note", func(ev faketg.Event) bool {
				return sendTo(e.group, m.ID)(ev) && strings.HasPrefix(ev.Text, "⚠")
			})
			t.Logf("the note: %q", note.Text)
			for _, want := range tc.inNote {
				if !strings.Contains(note.Text, want) {
					t.Errorf("note %q does not hold %q", note.Text, want)
				}
			}
			e.annotated(jobOf(m), shellv1alpha1.AnnotationDelivered, "")
			var sent []string
			for _, ev := range e.srv.Log().After(since).Of(faketg.Upload) {
				if ev.Media != nil && ev.OK() {
					sent = append(sent, ev.Media.Filename)
				}
			}
			if !slices.Equal(sent, tc.sent) {
				t.Errorf("sent %q, want %q", sent, tc.sent)
			}
		})
	}
}
