package bot_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/bot"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/faketg"
	"shelljob.dev/shelljob/internal/texts"
)

// hangingFollow reads what the spool has, then hangs, as an exec into a
// worker pod that went away may.
type hangingFollow struct{ bot.Cluster }

func (h hangingFollow) Follow(ctx context.Context, job *shellv1alpha1.ShellJob, offset int64, w io.Writer) (int64, error) {
	n, err := h.Cluster.Follow(ctx, job, offset, w)
	if err != nil {
		return n, err
	}
	<-ctx.Done()
	return n, ctx.Err()
}

// A job whose worker was lost gets its final once the job has ended, with
// what the bot read and a line that says so, although its output can no
// longer be read to its end.
func TestWorkerLostFinal(t *testing.T) {
	e := newEnv(t, envOptions{wrap: func(c bot.Cluster) bot.Cluster { return hangingFollow{c} }})
	since := e.srv.Seq()
	m := e.send(e.admin, e.group, ".a echo partial; sleep 30")
	pv := e.preview(since, e.group, m.ID)
	if err := e.cluster.LoseWorker(e.ctx, jobOf(m)); err != nil {
		t.Fatal(err)
	}
	if fin := e.finalEdit(pv.Seq, pv.MsgID); fin.Text != "partial\n\n"+texts.WorkerLost || fin.HasMarkup {
		t.Errorf("final = %q", fin.Text)
	}
}

// flood stands for a worker whose command wrote size bytes: the live
// follow gets them all, as fast as the bot reads; a follow from 0 once the
// job ended gets what the spool kept, its head and tail with the agent's
// not-kept line between them.
type flood struct {
	bot.Cluster
	size, kept int64

	mu      sync.Mutex
	follows int
	// grown is how much the heap grew while the bot read the flood.
	grown int64
}

func heapInUse() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse)
}

// FollowText is the agent's text of Follow's output from 0.
func (f *flood) FollowText(ctx context.Context, job *shellv1alpha1.ShellJob, mode agentapi.TextMode, w io.Writer) error {
	return agentapi.TextOfFollow(func(w io.Writer) error {
		_, err := f.Follow(ctx, job, 0, w)
		return err
	}, mode, w)
}

func (f *flood) Follow(ctx context.Context, job *shellv1alpha1.ShellJob, offset int64, w io.Writer) (int64, error) {
	f.mu.Lock()
	f.follows++
	first := f.follows == 1
	f.mu.Unlock()
	chunk := bytes.Repeat([]byte("y\n"), 32<<10)
	if !first {
		for range f.kept / 2 / int64(len(chunk)) {
			_, _ = w.Write(chunk)
		}
		_, _ = io.WriteString(w, agentapi.GapLine(f.size-f.kept))
		for range f.kept / 2 / int64(len(chunk)) {
			_, _ = w.Write(chunk)
		}
		return f.size, nil
	}
	before := heapInUse()
	for range f.size / int64(len(chunk)) {
		if _, err := w.Write(chunk); err != nil {
			return offset, err
		}
	}
	f.mu.Lock()
	f.grown = heapInUse() - before
	f.mu.Unlock()
	_, err := f.Cluster.Follow(ctx, job, 0, io.Discard)
	return f.size, err
}

// The bot keeps a small window of a running job's output, whatever it
// writes, and builds a long final from the spool: its .txt file counts
// what the spool did not keep, not what the bot did not.
func TestFloodMemoryAndNotKeptCount(t *testing.T) {
	f := &flood{size: 256 << 20, kept: 2 << 20}
	e := newEnv(t, envOptions{wrap: func(c bot.Cluster) bot.Cluster { f.Cluster = c; return f }})
	since := e.srv.Seq()
	m := e.send(e.admin, e.group, ".a sleep 1")
	up := e.finalFile(since, e.group, m.ID)
	f.mu.Lock()
	grown := f.grown
	f.mu.Unlock()
	// The heap is the whole test process's, the operator and the clients
	// of the API server included, whose caches move by a few MiB under a
	// parallel go test: the bound is far under the output held whole.
	if grown > 16<<20 {
		t.Errorf("the heap grew by %d MiB while the bot read a %d MiB output", grown>>20, f.size>>20)
	}
	data := string(up.Media.Data)
	line := strings.TrimSpace(agentapi.GapLine(f.size - f.kept))
	if strings.Count(data, "not kept") != 1 || !strings.Contains(data, "\n"+line+"\n") {
		t.Errorf("the file says %q, want one %q", notKeptLines(data), line)
	}
	if want := int(f.kept) + len(line) + 1; len(data) != want {
		t.Errorf("the file holds %d bytes, want %d", len(data), want)
	}
}

// countedFollows counts the follows that read an output from its start:
// the reads again from the spool (the first follow awaits the start).
type countedFollows struct {
	bot.Cluster
	fromStart atomic.Int32
}

func (c *countedFollows) Follow(ctx context.Context, job *shellv1alpha1.ShellJob, offset int64, w io.Writer) (int64, error) {
	if offset == 0 {
		c.fromStart.Add(1)
	}
	return c.Cluster.Follow(ctx, job, offset, w)
}

func (c *countedFollows) FollowText(ctx context.Context, job *shellv1alpha1.ShellJob, mode agentapi.TextMode, w io.Writer) error {
	c.fromStart.Add(1)
	return c.Cluster.FollowText(ctx, job, mode, w)
}

// Jobs share the bot's output memory: a job that finds it spent keeps only
// its preview's window, and its final, longer than that, is read whole
// from the spool; with room, the same final is built from memory.
func TestOutputMemorySpent(t *testing.T) {
	for _, tc := range []struct {
		memory int64
		reads  int32
	}{{memory: -1, reads: 2}, {memory: 0, reads: 0}} { // measured, then read for the text
		t.Run(fmt.Sprintf("memory %d", tc.memory), func(t *testing.T) {
			follows := &countedFollows{}
			e := newEnv(t, envOptions{outputMemory: tc.memory, wrap: func(c bot.Cluster) bot.Cluster { follows.Cluster = c; return follows }})
			since := e.srv.Seq()
			m := e.send(e.admin, e.group, ".a seq 1 6000")
			up := e.finalFile(since, e.group, m.ID)
			var want strings.Builder
			for i := 1; i <= 6000; i++ {
				fmt.Fprintf(&want, "%d\n", i)
			}
			// The final is trimmed: the last newline is not in it.
			if data := string(up.Media.Data); !strings.HasPrefix(data, strings.TrimSpace(want.String())) || strings.Contains(data, "not kept") {
				t.Errorf("the file holds %d bytes, starting %q, want the whole output (%d bytes)", len(data), data[:min(len(data), 40)], want.Len())
			}
			if n := follows.fromStart.Load(); n != tc.reads {
				t.Errorf("the output was read again from the spool %d times, want %d", n, tc.reads)
			}
		})
	}
}

func notKeptLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, "not kept") {
			out = append(out, l)
		}
	}
	return out
}

// slowFollow starts each follow late, as an exec into a pod does.
type slowFollow struct{ bot.Cluster }

func (s slowFollow) Follow(ctx context.Context, job *shellv1alpha1.ShellJob, offset int64, w io.Writer) (int64, error) {
	select {
	case <-time.After(time.Second):
	case <-ctx.Done():
		return offset, ctx.Err()
	}
	return s.Cluster.Follow(ctx, job, offset, w)
}

// After a restart of the bot, the first edit of a running job's preview
// shows the output's end, not an empty preview.
func TestResumedPreviewKeepsOutput(t *testing.T) {
	e := newEnv(t, envOptions{wrap: func(c bot.Cluster) bot.Cluster { return slowFollow{c} }})
	since := e.srv.Seq()
	m := e.send(e.admin, e.group, ".a for i in 1 2 3; do echo line$i; done; sleep 30")
	pv := e.preview(since, e.group, m.ID)
	if !strings.Contains(pv.Text, "line3") {
		t.Fatalf("preview = %q", pv.Text)
	}
	// The bot has recorded where the preview is.
	for {
		sj, err := e.cluster.Job(e.ctx, jobOf(m))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(sj.Annotations[shellv1alpha1.AnnotationPreview], `"msg"`) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.restart()
	after := e.srv.Seq()
	k := e.send(e.admin, e.group, ".k 1")
	e.wait(after, "the stop", sendTo(e.group, k.ID))
	first := e.wait(after, "the first edit", func(ev faketg.Event) bool {
		return ev.Kind == faketg.Edit && ev.MsgID == pv.MsgID
	})
	if !strings.Contains(first.Text, "line1\nline2\nline3") {
		t.Errorf("first edit after the restart = %q", first.Text)
	}
	fin := e.finalEdit(after, pv.MsgID)
	if want := fmt.Sprintf("line1\nline2\nline3\n\n%s", texts.StoppedNote(130)); fin.Text != want {
		t.Errorf("final = %q, want %q", fin.Text, want)
	}
}

// A job that ended on a live worker gets its whole output, however long
// after the end its follow succeeds (here, the stream API cannot be
// reached until then); only a lost worker cuts it.
func TestFinalWaitsForALiveWorkersOutput(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.cluster.Stream.Refuse(true)
	reached := time.AfterFunc(bot.OutputGrace+2*time.Second, func() { e.cluster.Stream.Refuse(false) })
	defer reached.Stop()
	since := e.srv.Seq()
	m := e.send(e.admin, e.group, ".a echo hi")
	if ev := e.final(since, e.group, m.ID); ev.Text != "hi" {
		t.Errorf("final = %q", ev.Text)
	}
}

// goneFollow fails as a follow does once the worker pod is gone.
type goneFollow struct{ bot.Cluster }

func (goneFollow) Follow(_ context.Context, _ *shellv1alpha1.ShellJob, offset int64, _ io.Writer) (int64, error) {
	return offset, fmt.Errorf("get worker pod shell-0: %w", bot.ErrWorkerGone)
}

// A follow that can never succeed does not hold the final.
func TestFinalWhenTheWorkerIsGone(t *testing.T) {
	e := newEnv(t, envOptions{wrap: func(c bot.Cluster) bot.Cluster { return goneFollow{c} }})
	since := e.srv.Seq()
	sent := time.Now()
	m := e.send(e.admin, e.group, ".a echo hi")
	ev := e.wait(since, "the final", sendTo(e.group, m.ID))
	if want := "The process exited 0.\n\n" + texts.OutputCut; ev.Text != want {
		t.Errorf("final = %q, want %q", ev.Text, want)
	}
	if d := ev.Time.Sub(sent); d > bot.OutputGrace {
		t.Errorf("the final came %v after the command: it waited for a follow that cannot succeed", d)
	}
}
