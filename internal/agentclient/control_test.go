package agentclient

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"shelljob.dev/shelljob/agent/agenttest"
	"shelljob.dev/shelljob/internal/agentapi"
)

// eventLog runs Events for a pod and keeps what it reports.
type eventLog struct {
	mu     sync.Mutex
	events []agentapi.Event
	synced chan struct{}
	done   chan error
}

func runEvents(ctx context.Context, c *Client) *eventLog {
	l := &eventLog{synced: make(chan struct{}, 8), done: make(chan error, 1)}
	go func() {
		l.done <- c.Events(ctx, pod, func(e agentapi.Event) {
			l.mu.Lock()
			l.events = append(l.events, e)
			l.mu.Unlock()
			if e.Type == agentapi.EventSynced {
				l.synced <- struct{}{}
			}
		})
	}()
	return l
}

// waitSynced waits for the stream's replay to end.
func (l *eventLog) waitSynced(t *testing.T) {
	t.Helper()
	select {
	case <-l.synced:
	case err := <-l.done:
		t.Fatalf("events ended: %v", err)
	case <-time.After(waitLong):
		t.Fatal("no synced event")
	}
}

// exited waits for the job's exit event.
func (l *eventLog) exited(t *testing.T, job string) agentapi.Event {
	t.Helper()
	deadline := time.Now().Add(waitLong)
	for time.Now().Before(deadline) {
		l.mu.Lock()
		for _, e := range l.events {
			if e.Job == job && e.Type == agentapi.EventExited {
				l.mu.Unlock()
				return e
			}
		}
		l.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no exit event of %s", job)
	return agentapi.Event{}
}

func count(calls []string, sub string) int {
	n := 0
	for _, c := range calls {
		if c == sub {
			n++
		}
	}
	return n
}

// warmAgent is a daemon, the fake API server that execs into it, and a
// warm client of it whose channel is up, until the end of the test.
type warmAgent struct {
	dir    string
	url    string
	f      *fakeExec
	c      *Client
	ctx    context.Context
	events *eventLog
}

func startWarm(t *testing.T) warmAgent {
	t.Helper()
	w := warmAgent{dir: startDaemon(t)}
	srv, f := newFakeAPIServer(t, map[string]string{pod.String(): w.dir})
	w.url, w.f = srv.URL, f
	w.c = newClient(t, srv.URL, Options{Warm: true})
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	t.Cleanup(cancel)
	w.ctx = ctx
	w.events = runEvents(ctx, w.c)
	w.events.waitSynced(t)
	return w
}

// olderThan is a client of the daemon in dir through execs that answer
// op's subcommand with a usage error, as an agent older than op does.
func olderThan(t *testing.T, dir, op string) *Client {
	srv, f := newFakeAPIServer(t, map[string]string{pod.String(): dir})
	f.refuse = map[string]int{op: agentapi.ExitUsage}
	return newClient(t, srv.URL, Options{})
}

// TestWarmChannel: with Warm, the events stream is the control channel,
// and starts, signals and follows go over it, not an exec each; a follow
// opened before the start waits for it; a cut channel leaves the calls to
// one-shot execs until it is open again.
func TestWarmChannel(t *testing.T) {
	w := startWarm(t)
	f, c, ctx, events := w.f, w.c, w.ctx, w.events
	if !c.ChannelUp(pod) {
		t.Fatal("channel not up after the replay")
	}

	// The follow waits for the job that the start then runs.
	followed := make(chan string, 1)
	saw := &seen{want: "hi\n", found: make(chan struct{})}
	go func() {
		n, err := c.Follow(ctx, pod, "w1", agentapi.AwaitStart, saw)
		out := saw.b.String()
		if err != nil {
			out += " error: " + err.Error()
		}
		if n != int64(len("hi\n")) {
			out += " short"
		}
		followed <- out
	}()
	time.Sleep(100 * time.Millisecond) // the follow waits on the agent
	resp, err := c.Start(ctx, pod, agentapi.StartRequest{Job: "w1", Command: "echo hi; exec sleep 100"})
	if err != nil || resp.PGID <= 0 {
		t.Fatalf("start over the channel: %+v, %v", resp, err)
	}
	if again, err := c.Start(ctx, pod, agentapi.StartRequest{Job: "w1", Command: "exit 1"}); err != nil || again != resp {
		t.Errorf("second start: %+v, %v", again, err)
	}
	select {
	case <-saw.found:
	case <-ctx.Done():
		t.Fatal("the awaited follow got nothing")
	}
	sig, err := c.Signal(ctx, pod, "w1", agentapi.SIGINT)
	if err != nil {
		t.Fatalf("signal over the channel: %v", err)
	}
	if e := events.exited(t, "w1"); e.ExitCode == nil || *e.ExitCode != 130 {
		t.Errorf("exit of w1: %+v (signal answered %+v)", e, sig)
	}
	if out := <-followed; out != "hi\n" {
		t.Errorf("awaited follow got %q", out)
	}
	if _, err := c.Signal(ctx, pod, "nosuchjob", agentapi.SIGINT); !errors.Is(err, agentapi.ErrUnknownJob) ||
		!strings.Contains(err.Error(), "agent signal in pod "+pod.String()) {
		t.Errorf("signal to an unknown job: %v", err)
	}
	calls := f.ran()
	if !slices.Equal(calls, []string{agentapi.CmdControl}) {
		t.Fatalf("execs with the channel up: %q", calls)
	}

	// Cut: the stream ends, and calls go through execs.
	if f.kill(agentapi.CmdControl) != 1 {
		t.Fatal("no control exec to cut")
	}
	select {
	case err := <-events.done:
		if err == nil || ctx.Err() != nil {
			t.Fatalf("events after the cut: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("events did not end with the cut")
	}
	if c.ChannelUp(pod) {
		t.Fatal("channel up after the cut")
	}
	if _, err := c.Start(ctx, pod, agentapi.StartRequest{Job: "w2", Command: "exit 3"}); err != nil {
		t.Fatalf("start with the channel down: %v", err)
	}
	if n := count(f.ran(), agentapi.CmdStart); n != 1 {
		t.Errorf("%d start execs with the channel down, want 1", n)
	}

	// Open again: the replay reports what happened meanwhile.
	again := runEvents(ctx, c)
	again.waitSynced(t)
	if e := again.exited(t, "w2"); e.ExitCode == nil || *e.ExitCode != 3 {
		t.Errorf("w2 replayed as %+v", e)
	}
	if !c.ChannelUp(pod) {
		t.Error("channel not up again")
	}
}

// TestWarmChannelOldAgent: an agent without the control channel gets the
// events stream alone, and one exec per call.
func TestWarmChannelOldAgent(t *testing.T) {
	dir := startDaemon(t)
	srv, f := newFakeAPIServer(t, map[string]string{pod.String(): dir})
	f.refuse = map[string]int{agentapi.CmdControl: agentapi.ExitUsage}
	c := newClient(t, srv.URL, Options{Warm: true})
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()

	events := runEvents(ctx, c)
	events.waitSynced(t)
	if c.ChannelUp(pod) {
		t.Fatal("channel up on an agent without one")
	}
	if _, err := c.Start(ctx, pod, agentapi.StartRequest{Job: "o1", Command: "exit 4"}); err != nil {
		t.Fatal(err)
	}
	if e := events.exited(t, "o1"); e.ExitCode == nil || *e.ExitCode != 4 {
		t.Errorf("o1: %+v", e)
	}
	if calls := f.ran(); !slices.Equal(calls, []string{agentapi.CmdControl, agentapi.CmdEvents, agentapi.CmdStart}) {
		t.Errorf("execs: %q", calls)
	}
}

// TestSharedFollows: with ShareFollows, the first follow on a pod is an
// exec of its own and opens a channel there; the follows after it go over
// that channel, awaited starts, unknown jobs and cancels included.
func TestSharedFollows(t *testing.T) {
	dir := startDaemon(t)
	srv, f := newFakeAPIServer(t, map[string]string{pod.String(): dir})
	c := newClient(t, srv.URL, Options{ShareFollows: true})
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()

	if _, err := c.Start(ctx, pod, agentapi.StartRequest{Job: "s1", Command: "echo one"}); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if n, err := c.Follow(ctx, pod, "s1", 0, &out); err != nil || n != 4 || out.String() != "one\n" {
		t.Fatalf("first follow: %d, %v, %q", n, err, out.String())
	}
	for !c.ChannelUp(pod) {
		select {
		case <-ctx.Done():
			t.Fatal("no channel after the first follow")
		case <-time.After(10 * time.Millisecond):
		}
	}
	execs := len(f.ran())

	saw := &seen{want: "two\n", found: make(chan struct{})}
	followed := make(chan error, 1)
	go func() {
		_, err := c.Follow(ctx, pod, "s2", agentapi.AwaitStart, saw)
		followed <- err
	}()
	time.Sleep(100 * time.Millisecond) // the follow waits on the agent
	if _, err := c.Start(ctx, pod, agentapi.StartRequest{Job: "s2", Command: "echo two"}); err != nil {
		t.Fatal(err)
	}
	if err := <-followed; err != nil || saw.b.String() != "two\n" {
		t.Errorf("awaited follow over the channel: %v, %q", err, saw.b.String())
	}
	if _, err := c.Follow(ctx, pod, "nosuchjob", 0, io.Discard); !errors.Is(err, agentapi.ErrUnknownJob) {
		t.Errorf("follow of an unknown job: %v", err)
	}

	// A follow whose reader leaves ends; the channel serves the next one.
	if _, err := c.Start(ctx, pod, agentapi.StartRequest{Job: "s3", Command: "echo three; exec sleep 100"}); err != nil {
		t.Fatal(err)
	}
	fctx, leave := context.WithCancel(ctx)
	three := &seen{want: "three\n", found: make(chan struct{})}
	left := make(chan error, 1)
	go func() {
		_, err := c.Follow(fctx, pod, "s3", 0, three)
		left <- err
	}()
	<-three.found
	leave()
	if err := <-left; !errors.Is(err, context.Canceled) {
		t.Errorf("left follow: %v", err)
	}
	out.Reset()
	if _, err := c.Follow(ctx, pod, "s1", 0, &out); err != nil || out.String() != "one\n" {
		t.Errorf("follow after a left one: %v, %q", err, out.String())
	}
	if calls := f.ran()[execs:]; len(calls) != 0 {
		t.Errorf("execs with the channel up: %q", calls)
	}
	if _, err := c.Signal(ctx, pod, "s3", agentapi.SIGKILL); err != nil {
		t.Error(err)
	}
}

// TestSharedFollowsOldAgent: an agent without the control channel gets an
// exec per follow, and one try at a channel.
func TestSharedFollowsOldAgent(t *testing.T) {
	dir := startDaemon(t)
	srv, f := newFakeAPIServer(t, map[string]string{pod.String(): dir})
	f.refuse = map[string]int{agentapi.CmdControl: agentapi.ExitUsage}
	c := newClient(t, srv.URL, Options{ShareFollows: true})
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if _, err := c.Start(ctx, pod, agentapi.StartRequest{Job: "o1", Command: "echo old"}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		var out strings.Builder
		if _, err := c.Follow(ctx, pod, "o1", 0, &out); err != nil || out.String() != "old\n" {
			t.Fatalf("follow: %v, %q", err, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if calls := f.ran(); count(calls, agentapi.CmdControl) != 1 || count(calls, agentapi.CmdFollow) != 3 {
		t.Errorf("execs: %q", calls)
	}
}

// TestFollowText: the final text comes made by the agent, over an exec or
// the shared channel; an agent older than the text stream has its follow
// made into the same text here.
func TestFollowText(t *testing.T) {
	const want = "R\\xffred\n100%"
	for name, refuse := range map[string]map[string]int{
		"new agent": nil,
		"old agent": {agentapi.CmdFollow + " " + agentapi.FlagText: agentapi.ExitUsage, agentapi.CmdControl: agentapi.ExitUsage},
	} {
		t.Run(name, func(t *testing.T) {
			dir := startDaemon(t)
			srv, f := newFakeAPIServer(t, map[string]string{pod.String(): dir})
			f.refuse = refuse
			c := newClient(t, srv.URL, Options{ShareFollows: true})
			ctx, cancel := context.WithTimeout(context.Background(), waitLong)
			defer cancel()
			if _, err := c.Start(ctx, pod, agentapi.StartRequest{Job: "t1", Command: `printf 'a\xff\x1b[31mred\x1b[0m\rR\n10%%\r100%%'`}); err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			if err := c.FollowText(ctx, pod, "t1", agentapi.TextRendered, &out); err != nil || out.String() != want {
				t.Fatalf("first: %v, %q, want %q", err, out.String(), want)
			}
			calls := f.ran()
			if refuse == nil {
				for !c.ChannelUp(pod) {
					select {
					case <-ctx.Done():
						t.Fatal("no channel after the first follow")
					case <-time.After(10 * time.Millisecond):
					}
				}
				calls = f.ran()
			}
			out.Reset()
			if err := c.FollowText(ctx, pod, "t1", agentapi.TextRendered, &out); err != nil || out.String() != want {
				t.Errorf("second: %v, %q, want %q", err, out.String(), want)
			}
			more := f.ran()[len(calls):]
			switch {
			case refuse == nil && len(more) != 0:
				t.Errorf("execs with the channel up: %q", more)
			case refuse != nil && count(more, agentapi.CmdFollow) != 2:
				t.Errorf("execs of an old agent's second text: %q, want its refusal and a follow", more)
			}
		})
	}
}

// TestDelivered: a delivery mark goes over the warm channel while it is up,
// through an exec of its own otherwise, and reaches the job's spool; an
// agent older than the mark answers ErrUsage.
func TestDelivered(t *testing.T) {
	w := startWarm(t)
	dir, f, warm, ctx, events := w.dir, w.f, w.c, w.ctx, w.events
	for _, job := range []string{"d1", "d2"} {
		if _, err := warm.Start(ctx, pod, agentapi.StartRequest{Job: job, Command: "true"}); err != nil {
			t.Fatal(err)
		}
		events.exited(t, job)
	}
	marked := func(job string) bool {
		_, err := os.Stat(filepath.Join(dir, "jobs", job, "delivered"))
		return err == nil
	}
	if err := warm.Delivered(ctx, pod, "d1"); err != nil || !marked("d1") {
		t.Fatalf("delivered over the channel: %v, marked %v", err, marked("d1"))
	}
	if n := count(f.ran(), agentapi.CmdDelivered); n != 0 {
		t.Errorf("%d delivered execs with the channel up", n)
	}
	cold := newClient(t, w.url, Options{})
	if err := cold.Delivered(ctx, pod, "d2"); err != nil || !marked("d2") {
		t.Fatalf("delivered through an exec: %v, marked %v", err, marked("d2"))
	}
	if n := count(f.ran(), agentapi.CmdDelivered); n != 1 {
		t.Errorf("%d delivered execs without a channel, want 1", n)
	}
	if err := olderThan(t, dir, agentapi.CmdDelivered).Delivered(ctx, pod, "d2"); !errors.Is(err, agentapi.ErrUsage) {
		t.Errorf("delivered on an older agent: %v, want ErrUsage", err)
	}
}

// TestHangup: a hangup goes over the warm channel while it is up, through
// an exec of its own otherwise, with its session either way: one that
// names another attach leaves the console and its attach alone, one that
// names its attach kills that attach and hangs the console up. A job
// that is no console is refused; an agent older than the hangup answers
// ErrUsage.
func TestHangup(t *testing.T) {
	w := startWarm(t)
	dir, f, warm, ctx, events := w.dir, w.f, w.c, w.ctx, w.events
	cold := newClient(t, w.url, Options{})
	if _, err := warm.Start(ctx, pod, agentapi.StartRequest{Job: "plain", Command: "sleep 1000"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		c    *Client
		// execs is how many hangup execs each call makes.
		execs int
	}{{"over the channel", warm, 0}, {"through an exec", cold, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			job := strings.ReplaceAll(tc.name, " ", "-")
			if _, err := warm.Start(ctx, pod, agentapi.StartRequest{Job: job, Command: agenttest.ConsoleShell, Console: true}); err != nil {
				t.Fatal(err)
			}
			a := agenttest.Attach(t, dir, job, 24, 80, agentapi.FlagSession+"=mine")
			a.WaitScreen("READY> ")
			before := count(f.ran(), agentapi.CmdHangup)
			if err := tc.c.Hangup(ctx, pod, job, "another"); err != nil {
				t.Fatalf("hangup of another attach: %v", err)
			}
			a.TypeLine("print still=$((6*7))")
			a.WaitScreen("still=42")
			if err := tc.c.Hangup(ctx, pod, job, "mine"); err != nil {
				t.Fatalf("hangup of the attach: %v", err)
			}
			if !a.Killed() {
				t.Errorf("the attach ended with %v, want killed", a.Cmd.ProcessState)
			}
			if code := *events.exited(t, job).ExitCode; code != 1 && code != 129 {
				t.Errorf("the console ended with %d, not of a hangup", code)
			}
			if n := count(f.ran(), agentapi.CmdHangup) - before; n != 2*tc.execs {
				t.Errorf("%d hangup execs, want %d", n, 2*tc.execs)
			}
			if err := tc.c.Hangup(ctx, pod, "plain", ""); err == nil || !strings.Contains(err.Error(), "no console") {
				t.Errorf("hangup of a Fork job: %v, want it refused", err)
			}
		})
	}
	if err := olderThan(t, dir, agentapi.CmdHangup).Hangup(ctx, pod, "plain", ""); !errors.Is(err, agentapi.ErrUsage) {
		t.Errorf("hangup on an older agent: %v, want ErrUsage", err)
	}
}

// TestChannelFollowCompressed: a follow over the channel asks for its
// pieces compressed, so that output that compresses crosses the exec
// stream in a fraction of its size; output that does not arrives whole
// too, and both read back byte for byte as the one-shot follow gives them.
func TestChannelFollowCompressed(t *testing.T) {
	w := startWarm(t)
	f, c, ctx, events := w.f, w.c, w.ctx, w.events
	commands := map[string]string{
		"text":   "seq 1 300000", // 2 MB that compresses
		"random": "head -c 2000000 /dev/urandom | od -An -v -tx1 | head -c 1000000; head -c 1000000 /dev/urandom",
	}
	for job, command := range commands {
		if _, err := c.Start(ctx, pod, agentapi.StartRequest{Job: job, Command: command}); err != nil {
			t.Fatal(err)
		}
		events.exited(t, job)
		before := f.wrote(agentapi.CmdControl)
		var got strings.Builder
		n, err := c.Follow(ctx, pod, job, 0, &got)
		if err != nil || n != int64(got.Len()) {
			t.Fatalf("%s: follow over the channel: %d bytes of %d, %v", job, n, got.Len(), err)
		}
		carried := f.wrote(agentapi.CmdControl) - before
		old := olderThan(t, w.dir, agentapi.CmdControl)
		var want strings.Builder
		if _, err := old.Follow(ctx, pod, job, 0, &want); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Fatalf("%s: the channel's follow gave %d bytes, not the %d of a one-shot follow", job, got.Len(), want.Len())
		}
		t.Logf("%s: %d bytes of output, %d on the channel", job, n, carried)
		if job == "text" && carried > n/2 {
			t.Errorf("%s: %d bytes of output took %d on the channel, want less than half", job, n, carried)
		}
	}
}

// TestChannelFollowExit: a follow over the channel into an ExitSink gets
// the job's exit with the output's end, from a follow opened before the
// start too; a one-shot exec's follow gets none, and its reader asks the
// status.
func TestChannelFollowExit(t *testing.T) {
	w := startWarm(t)
	c, ctx, events := w.c, w.ctx, w.events
	type followed struct {
		out  string
		exit *agentapi.Event
	}
	follow := func(c *Client, job string, offset int64) followed {
		var out strings.Builder
		w := agentapi.ExitWriter{Writer: &out}
		if _, err := c.Follow(ctx, pod, job, offset, &w); err != nil {
			t.Error(err)
		}
		return followed{out.String(), w.Exited}
	}
	waiting := make(chan followed)
	go func() { waiting <- follow(c, "files", agentapi.AwaitStart) }()
	if _, err := c.Start(ctx, pod, agentapi.StartRequest{Job: "files", Command: `echo out; echo x > "$SHELLJOB_OUT/f"; exit 3`}); err != nil {
		t.Fatal(err)
	}
	got := <-waiting
	if e := got.exit; got.out != "out\n" || e == nil || e.ExitCode == nil || *e.ExitCode != 3 || e.Files == nil || e.Files.Count != 1 || len(e.Signals) != 0 {
		t.Fatalf("follow opened before the start: %q, exit %+v", got.out, got.exit)
	}

	if _, err := c.Start(ctx, pod, agentapi.StartRequest{Job: "stopped", Command: "sleep 100"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Signal(ctx, pod, "stopped", agentapi.SIGTERM); err != nil {
		t.Fatal(err)
	}
	events.exited(t, "stopped")
	if e := follow(c, "stopped", 0).exit; e == nil || len(e.Signals) != 1 || e.Signals[0].Signal != agentapi.SIGTERM {
		t.Fatalf("a stopped job's exit: %+v", e)
	}

	old := olderThan(t, w.dir, agentapi.CmdControl)
	if got := follow(old, "files", 0); got.out != "out\n" || got.exit != nil {
		t.Fatalf("a one-shot follow: %q, exit %+v", got.out, got.exit)
	}
}
