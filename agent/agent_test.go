package agent_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/types"

	"shelljob.dev/shelljob/agent"
	"shelljob.dev/shelljob/agent/agenttest"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/liveoutput"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

func TestEchoHi(t *testing.T) {
	d := startDaemon(t)
	d.start("echo", "echo hi; echo err >&2", false)
	if got := d.output("echo"); got != "hi\nerr\n" {
		t.Errorf("output %q, want stdout and stderr merged", got)
	}
	e := d.exited("echo")
	if code(t, e) != 0 || e.OutputBytes != 7 || e.DroppedBytes != 0 || e.LastOutput == nil {
		t.Errorf("exited %+v", e)
	}
}

func TestExitCode(t *testing.T) {
	d := startDaemon(t)
	d.start("exit3", "exit 3", false)
	if got := code(t, d.exited("exit3")); got != 3 {
		t.Errorf("exit code %d, want 3", got)
	}
}

func TestEnvironment(t *testing.T) {
	d := startDaemon(t)
	d.start("env", `pwd; echo "$HOME"; echo "$ZDOTDIR" "$SHELLJOB_JOB"; ls -A "$ZDOTDIR" | wc -l; `+
		`[ -t 0 ] || echo no-terminal; cat; echo stdin-empty; `+
		`[ "$(ps -o pgid= $$ | tr -d ' ')" = $$ ] && echo own-group; `+
		`[ "$(ps -o sid= $$ | tr -d ' ')" = $$ ] && echo own-session; echo "$SHELLJOB_OUT"`, false)
	home := d.home
	if agent.IsolationImpossible() == "" {
		home = filepath.Join(d.dir, "jobs", "env", "home") // a Fork job's own
	}
	want := strings.Join([]string{home, home, d.dir + "/zdotdir env", "0", "no-terminal", "stdin-empty",
		"own-group", "own-session", d.jobFile("env", "")}, "\n")
	if got := strings.TrimRight(d.output("env"), "/\n"); got != strings.TrimRight(want, "/") {
		t.Errorf("output\n%s\nwant\n%s", got, want)
	}
}

func TestInterrupt(t *testing.T) {
	d := startDaemon(t)
	r := d.start("sleep", "sleep 100", false)
	waitProc(t, r.PGID, "sleep")
	sent := time.Now()
	d.signal("sleep", agentapi.SIGINT)
	e := d.exited("sleep")
	if code(t, e) != 130 {
		t.Errorf("exit code %d, want 130", *e.ExitCode)
	}
	if took := e.Time.Sub(sent); took > 5*time.Second {
		t.Errorf("ended %v after SIGINT", took)
	}
	if r := d.signal("sleep", agentapi.SIGTERM); !r.GroupEmpty {
		t.Error("signal to an ended job found its group not empty")
	}
}

// endedAtTerm checks that the job outlived SIGINT and ended with SIGTERM,
// which went a step (2 s) after it.
func endedAtTerm(t *testing.T, e agentapi.Event, steps map[agentapi.Signal]time.Time) {
	t.Helper()
	if steps[agentapi.SIGTERM].IsZero() {
		t.Fatalf("no SIGTERM step: %v", steps)
	}
	if after := e.Time.Sub(steps[agentapi.SIGINT]); after < agentapi.StopGrace/2 {
		t.Errorf("ended %v after SIGINT, before SIGTERM", after)
	}
}

// stopSteps runs the operator's escalation and returns when each step went.
func stopSteps(t *testing.T, d *daemon, id string) map[agentapi.Signal]time.Time {
	t.Helper()
	steps := map[agentapi.Signal]time.Time{}
	err := d.c.Stop(ctxFor(t, waitLong), id, agentapi.StopGrace, func(sig agentapi.Signal, r agentapi.SignalResponse) {
		steps[sig] = time.Now()
		t.Logf("%s: group empty %v", sig, r.GroupEmpty)
	})
	if err != nil {
		t.Fatal(err)
	}
	return steps
}

func TestIgnoredInterruptEndsAtTerm(t *testing.T) {
	// An orphan grace far longer than the stop tells an end at SIGTERM
	// from one a grace later, however loaded the machine.
	const orphanGrace = 30 * time.Second
	d := startDaemon(t, "--orphan-grace="+orphanGrace.String())
	r := d.start("stubborn", "trap '' INT; sleep 100", false)
	waitProc(t, r.PGID, "sleep")
	steps := stopSteps(t, d, "stubborn")
	e := d.exited("stubborn")
	if code(t, e) != 143 {
		t.Errorf("exit code %d, want 143 (SIGTERM)", *e.ExitCode)
	}
	endedAtTerm(t, e, steps)
	if _, ok := steps[agentapi.SIGKILL]; ok {
		t.Error("escalated to SIGKILL")
	}
	// SIGTERM emptied the group: the job ends with it, not an orphan grace
	// later.
	if after := e.Time.Sub(steps[agentapi.SIGTERM]); after > orphanGrace/2 {
		t.Errorf("ended %v after SIGTERM emptied the group", after)
	}
}

func TestTrapOutputKept(t *testing.T) {
	d := startDaemon(t)
	r := d.start("trap", "trap 'echo caught INT; exit 7' INT; echo ready; sleep 100; echo never", false)
	waitProc(t, r.PGID, "sleep")
	d.signal("trap", agentapi.SIGINT)
	if got := code(t, d.exited("trap")); got != 7 {
		t.Errorf("exit code %d, want the trap's 7", got)
	}
	if got := d.output("trap"); got != "ready\ncaught INT\n" {
		t.Errorf("output %q", got)
	}
}

func TestBackgroundJobHoldsOutput(t *testing.T) {
	d := startDaemon(t)
	r := d.start("bg", "sleep 100 & echo started", false)
	d.waitOutput("bg", "started\n")
	waitProc(t, r.PGID, "sleep")
	d.stillRunning("bg", time.Second)
	// A non-interactive shell's background job ignores SIGINT: it ends at
	// SIGTERM, and the job with it.
	steps := stopSteps(t, d, "bg")
	e := d.exited("bg")
	if code(t, e) != 0 {
		t.Errorf("exit code %d, want the shell's 0", *e.ExitCode)
	}
	endedAtTerm(t, e, steps)
}

func TestSetsidDaemonHoldingOutput(t *testing.T) {
	d := startDaemon(t)
	// The daemon leaves the group and keeps the output open for good.
	d.start("daemon", `setsid sh -c 'echo $$ > "$SHELLJOB_OUT/pid"; exec sleep 100' & `+
		`while [ ! -s "$SHELLJOB_OUT/pid" ]; do sleep 0.05; done; echo started`, false)
	e := d.exited("daemon")
	if code(t, e) != 0 {
		t.Errorf("exit code %d, want 0", *e.ExitCode)
	}
	if got := d.output("daemon"); got != "started\n" {
		t.Errorf("output %q", got)
	}
	// That the job ends with its setsid process, isolated or not, is
	// TestNothingLeftBehind's.

	// Stopped, the same: the group empties at SIGINT, and the job ends.
	r := d.start("daemon2", `setsid sh -c 'echo $$ > "$SHELLJOB_OUT/pid"; exec sleep 100' & sleep 100`, false)
	waitProc(t, r.PGID, "sleep")
	d.signal("daemon2", agentapi.SIGINT)
	if got := code(t, d.exited("daemon2")); got != 130 {
		t.Errorf("exit code %d, want 130", got)
	}
}

func TestStatefulKeepsState(t *testing.T) {
	d := startDaemon(t)
	sub := t.TempDir()
	d.start("s1", "cd "+sub+" && X=5 && f() { echo fn $1 }", true)
	if got := code(t, d.exited("s1")); got != 0 {
		t.Fatalf("s1 exit code %d", got)
	}
	d.start("s2", `echo "$PWD" $X; f a; echo "$SHELLJOB_JOB"`, true)
	if got, want := d.output("s2"), sub+" 5\nfn a\ns2\n"; got != want {
		t.Errorf("s2 output %q, want %q", got, want)
	}

	// A stop ends the command with 130; the shell and its state stay.
	shell := d.start("s3", "echo before; sleep 100; echo never", true).PGID
	waitProc(t, shell, "sleep")
	d.signal("s3", agentapi.SIGINT)
	if got := code(t, d.exited("s3")); got != 130 {
		t.Errorf("s3 exit code %d, want 130", got)
	}
	if got := d.output("s3"); got != "before\n" {
		t.Errorf("s3 output %q", got)
	}
	d.start("s4", `echo "$PWD" $X; f b`, true)
	if got, want := d.output("s4"), sub+" 5\nfn b\n"; got != want {
		t.Errorf("after a stop: %q, want %q", got, want)
	}

	// A builtin loop stops too, as 130.
	d.start("s5", "while :; do :; done", true)
	d.stillRunning("s5", 300*time.Millisecond)
	d.signal("s5", agentapi.SIGINT)
	if got := code(t, d.exited("s5")); got != 130 {
		t.Errorf("loop exit code %d, want 130", got)
	}

	// One at a time.
	d.start("s6", "sleep 100", true)
	waitProc(t, shell, "sleep")
	_, err := d.c.Start(ctxFor(t, waitShort), agentapi.StartRequest{Job: "s7", Command: "true", Stateful: true})
	if !errors.Is(err, agentapi.ErrBusy) {
		t.Errorf("second stateful start: %v, want ErrBusy", err)
	}
	d.signal("s6", agentapi.SIGINT)
	d.exited("s6")

	// A shell that exits ends its job with its status; the next job gets a
	// fresh shell, at home, without the old state.
	d.start("s8", "exit 3", true)
	if got := code(t, d.exited("s8")); got != 3 {
		t.Errorf("exit code %d, want 3", got)
	}
	d.start("s9", `echo "$PWD" ${X:-unset}`, true)
	if got, want := d.output("s9"), d.home+" unset\n"; got != want {
		t.Errorf("after a restart: %q, want %q", got, want)
	}
}

func TestStatefulIgnoredInterrupt(t *testing.T) {
	d := startDaemon(t)
	d.start("s1", "X=kept", true)
	d.exited("s1")
	// SIGTERM ends the command's sleep; the shell ignores it and goes on.
	r := d.start("s2", "trap '' INT; sleep 100; echo after $?; trap - INT", true)
	waitProc(t, r.PGID, "sleep")
	stopSteps(t, d, "s2")
	if got := code(t, d.exited("s2")); got != 0 {
		t.Errorf("exit code %d, want 0 (the command went on)", got)
	}
	if got := d.output("s2"); got != "after 143\n" {
		t.Errorf("output %q", got)
	}
	d.start("s3", "echo $X", true)
	if got := d.output("s3"); got != "kept\n" {
		t.Errorf("state after SIGTERM: %q", got)
	}
}

func TestStatefulKilledShellRestarts(t *testing.T) {
	d := startDaemon(t)
	r := d.start("s1", "X=lost; trap '' INT TERM; sleep 100", true)
	waitProc(t, r.PGID, "sleep")
	d.signal("s1", agentapi.SIGKILL)
	if got := code(t, d.exited("s1")); got != 137 {
		t.Errorf("exit code %d, want 137", got)
	}
	d.start("s2", "echo ${X:-unset}", true)
	if got := d.output("s2"); got != "unset\n" {
		t.Errorf("after SIGKILL: %q", got)
	}
}

func TestFollowFromOffsetAndReconnect(t *testing.T) {
	d := startDaemon(t)
	d.start("lines", "for i in {1..20}; do echo line$i; sleep 0.05; done", false)
	var got bytes.Buffer
	offset := int64(0)
	for reconnects := 0; ; reconnects++ {
		// Cut the stream after its first bytes, as a broken exec would.
		ctx, cancel := context.WithCancel(context.Background())
		w := &cutWriter{w: &got, cut: cancel}
		n, err := d.c.Follow(ctx, "lines", offset, w)
		cancel()
		if n < offset {
			t.Fatalf("follow went back from %d to %d", offset, n)
		}
		offset = n
		if err == nil {
			t.Logf("%d reconnects", reconnects)
			break
		}
		if reconnects > 100 {
			t.Fatal("never reached the end")
		}
	}
	var want strings.Builder
	for i := 1; i <= 20; i++ {
		want.WriteString("line" + strconv.Itoa(i) + "\n")
	}
	if got.String() != want.String() {
		t.Errorf("reassembled %q", got.String())
	}
	if offset != int64(want.Len()) {
		t.Errorf("ended at offset %d, want %d", offset, want.Len())
	}
	var tail bytes.Buffer
	if n, err := d.c.Follow(ctxFor(t, waitShort), "lines", 10, &tail); err != nil || n != int64(want.Len()) || tail.String() != want.String()[10:] {
		t.Errorf("from 10: %q, %d, %v", tail.String(), n, err)
	}
}

// A follow gets keepalive frames while it waits for the start and while
// the command is silent, and none after its e frame.
func TestFollowKeepalives(t *testing.T) {
	d := startDaemon(t, "--follow-keepalive", "100ms")
	var wire utiltesting.SyncBuffer
	done := make(chan error, 1)
	go func() { done <- d.c.FollowFrames(ctxFor(t, waitLong), "quiet", agentapi.AwaitStart, false, &wire) }()
	keepalive := agentapi.FollowMagic + "d 0\nd 0\n"
	for deadline := time.Now().Add(waitShort); !strings.HasPrefix(wire.String(), keepalive); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("before the start: %q, want keepalives", wire.String())
		}
	}
	d.start("quiet", "sleep 0.5; printf done; sleep 0.5", false)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := wire.String()
	var text bytes.Buffer
	if n, err := agentapi.ReadFollow(strings.NewReader(got), agentapi.AwaitStart, &text); err != nil || n != 4 || text.String() != "done" {
		t.Errorf("read %q: %d, %q, %v", got, n, text.String(), err)
	}
	i := strings.Index(got, "d 4\ndone")
	if i < 0 || !strings.HasSuffix(got, "e 4\n") {
		t.Fatalf("stream %q", got)
	}
	if !strings.HasPrefix(got[i+len("d 4\ndone"):], "d 0\nd 0\n") {
		t.Errorf("no keepalives while the command is silent after its output: %q", got)
	}
}

// cutWriter cancels its follow once it got something.
type cutWriter struct {
	w   io.Writer
	cut func()
}

func (c *cutWriter) Write(p []byte) (int, error) {
	c.cut()
	return c.w.Write(p)
}

func TestCaps(t *testing.T) {
	d := startDaemon(t, "--head-bytes=100", "--tail-bytes=100", "--after-stop-bytes=50", "--chunk-bytes=16")
	seq := seqOutput(1000)

	d.start("seq", "seq 1 1000", false)
	d.exited("seq")
	want := seq[:100] + agentapi.GapLine(int64(len(seq)-200)) + seq[len(seq)-100:]
	if got := d.output("seq"); got != want {
		t.Errorf("kept\n%q\nwant\n%q", got, want)
	}
	e := d.exited("seq")
	if e.OutputBytes != int64(len(seq)) || e.DroppedBytes != int64(len(seq)-200) {
		t.Errorf("counters %+v", e)
	}

	r := d.start("stop", "trap 'seq 1 1000; exit 9' INT; echo ready; sleep 100; :", false)
	waitProc(t, r.PGID, "sleep")
	// Bytes still in the pipe when the stop lands count as written after it.
	d.waitOutput("stop", "ready\n")
	d.signal("stop", agentapi.SIGINT)
	if got := code(t, d.exited("stop")); got != 9 {
		t.Errorf("exit code %d, want 9", got)
	}
	want = "ready\n" + seq[:50] + agentapi.AfterStopLine(int64(len(seq)-50))
	if got := d.output("stop"); got != want {
		t.Errorf("kept after the stop\n%q\nwant\n%q", got, want)
	}

	// Both caps fall inside a character here.
	d.start("utf8", `printf x; for i in {1..300}; do printf 'é€'; done; printf y`, false)
	src := []byte("x" + strings.Repeat("é€", 300) + "y")
	h, s := 100-incompleteSuffix(src[97:100]), charStart(src, len(src)-100)
	if h == 100 || s == len(src)-100 {
		t.Fatalf("the caps cut no character (head %d, tail from %d)", h, s)
	}
	want = string(src[:h]) + agentapi.GapLine(int64(s-h)) + string(src[s:])
	d.exited("utf8") // a follow while it runs may get more of the tail
	if got := d.output("utf8"); got != want || !utf8.ValidString(got) {
		t.Errorf("kept\n%q\nwant\n%q", got, want)
	}
}

func seqOutput(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		b.WriteString(strconv.Itoa(i) + "\n")
	}
	return b.String()
}

// slowWriter stands for a follower far slower than the command.
type slowWriter struct{ n atomic.Int64 }

func (s *slowWriter) Write(p []byte) (int, error) {
	time.Sleep(100 * time.Millisecond)
	s.n.Add(int64(len(p)))
	return len(p), nil
}

func TestHugeBinaryOutput(t *testing.T) {
	d := startDaemon(t)
	const size = 64 << 20
	d.start("huge", `head -c 64M /dev/urandom | tee "$SHELLJOB_OUT/copy"`, false)

	slow := &slowWriter{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _, _ = d.c.Follow(ctx, "huge", 0, slow) }()

	e := d.exited("huge")
	if read := slow.n.Load(); read >= size/2 {
		t.Errorf("the command ended only after a slow follower read %d bytes", read)
	}
	cancel()
	if code(t, e) != 0 || e.OutputBytes != size {
		t.Fatalf("exited %+v", e)
	}
	src, err := os.ReadFile(d.jobFile("huge", "copy"))
	if err != nil || len(src) != size {
		t.Fatalf("copy: %d bytes, %v", len(src), err)
	}
	var out bytes.Buffer
	if n, err := d.c.Follow(ctxFor(t, waitLong), "huge", 0, &out); err != nil || n != size {
		t.Fatalf("follow: %d, %v", n, err)
	}
	h := 16<<20 - incompleteSuffix(src[16<<20-3:16<<20])
	s := charStart(src, size-16<<20)
	want := append(append(append([]byte{}, src[:h]...), agentapi.GapLine(int64(s-h))...), src[s:]...)
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("follow gave %d bytes, want the %d kept (head %d, tail from %d)", out.Len(), len(want), h, s)
	}
	if e.DroppedBytes != int64(s-h) {
		t.Errorf("dropped %d, want %d", e.DroppedBytes, s-h)
	}
}

// incompleteSuffix and charStart restate the spool's cut rules.
func incompleteSuffix(b []byte) int {
	for i := 1; i <= len(b) && i < utf8.UTFMax; i++ {
		c := b[len(b)-i]
		if utf8.RuneStart(c) {
			need := 1
			switch {
			case c >= 0xF8:
			case c >= 0xF0:
				need = 4
			case c >= 0xE0:
				need = 3
			case c >= 0xC0:
				need = 2
			}
			if need > i {
				return i
			}
			return 0
		}
	}
	return 0
}

func charStart(b []byte, off int) int {
	for i := 0; i < utf8.UTFMax && off+i < len(b); i++ {
		if utf8.RuneStart(b[off+i]) {
			return off + i
		}
	}
	return off
}

func TestEventsReportJobsEndedUnheard(t *testing.T) {
	d := startDaemon(t)
	d.start("quiet", "echo done", false)
	d.output("quiet") // ends with the job; no events stream was open

	check := func(when string) {
		t.Helper()
		var evs []agentapi.Event
		ctx, cancel := context.WithTimeout(context.Background(), waitShort)
		defer cancel()
		_ = d.c.Events(ctx, func(e agentapi.Event) {
			evs = append(evs, e)
			if e.Type == agentapi.EventSynced {
				cancel()
			}
		})
		if len(evs) != 3 || evs[0].Type != agentapi.EventExited || evs[0].Job != "quiet" ||
			evs[0].ExitCode == nil || *evs[0].ExitCode != 0 || evs[0].OutputBytes != 5 ||
			evs[1].Type != agentapi.EventWorker || evs[1].Worker == nil || evs[2].Type != agentapi.EventSynced {
			t.Errorf("%s: events %+v", when, evs)
		}
	}
	check("new stream")
	d.stop()
	d.run()
	check("after an agent restart")
}

func TestEventsStream(t *testing.T) {
	d := startDaemon(t, "--status-interval=100ms")
	d.start("old", "true", false)
	d.exited("old")

	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	evs := make(chan agentapi.Event, 1000)
	go func() {
		_ = d.c.Events(ctx, func(e agentapi.Event) { evs <- e })
		close(evs)
	}()
	next := func() agentapi.Event {
		t.Helper()
		select {
		case e := <-evs:
			return e
		case <-ctx.Done():
			t.Fatal("no event")
		}
		return agentapi.Event{}
	}
	if e := next(); e.Type != agentapi.EventExited || e.Job != "old" {
		t.Fatalf("snapshot: %+v", e)
	}
	if e := next(); e.Type != agentapi.EventWorker || e.Worker == nil || e.Job != "" {
		t.Fatalf("the worker's state: %+v", e)
	}
	if e := next(); e.Type != agentapi.EventSynced {
		t.Fatalf("after the snapshot: %+v", e)
	}
	resp := d.start("live", "echo a; sleep 100", false)
	if e := next(); e.Type != agentapi.EventStarted || e.Job != "live" || e.PGID != resp.PGID || !e.Time.Equal(resp.StartedAt) {
		t.Fatalf("started: %+v", e)
	}
	for {
		e := next()
		if e.Type == agentapi.EventStatus && e.Job == "live" && e.OutputBytes == 2 && e.LastOutput != nil {
			break
		}
	}
	d.signal("live", agentapi.SIGINT)
	for {
		e := next()
		if e.Type == agentapi.EventExited {
			if e.Job != "live" || *e.ExitCode != 130 || e.OutputBytes != 2 {
				t.Errorf("exited: %+v", e)
			}
			break
		}
	}
}

func TestLostAfterAgentCrash(t *testing.T) {
	d := startDaemon(t)
	resp := d.start("orphan", "sleep 100", false)
	t.Cleanup(func() { _ = syscall.Kill(-resp.PGID, syscall.SIGKILL) })
	d.crash()
	d.run()
	e := d.exited("orphan")
	if !e.Lost || e.ExitCode != nil {
		t.Errorf("after a crash: %+v", e)
	}
	if again := d.start("orphan", "sleep 100", false); again != resp {
		t.Errorf("start after a crash: %+v, want the first answer %+v", again, resp)
	}
}

func TestStartIsIdempotent(t *testing.T) {
	d := startDaemon(t)
	first := d.start("once", `echo run >> "$SHELLJOB_OUT/runs"; sleep 0.2`, false)
	again := d.start("once", `echo run >> "$SHELLJOB_OUT/runs"; sleep 0.2`, false)
	if again != first {
		t.Errorf("second start %+v, want %+v", again, first)
	}
	d.exited("once")
	if third := d.start("once", "echo other", false); third != first {
		t.Errorf("start after the end %+v, want %+v", third, first)
	}
	if b, _ := os.ReadFile(d.jobFile("once", "runs")); string(b) != "run\n" {
		t.Errorf("runs %q", b)
	}
}

func TestFiles(t *testing.T) {
	d := startDaemon(t)
	var in bytes.Buffer
	tw := tar.NewWriter(&in)
	for name, body := range map[string]string{"in.txt": "hello", "sub/deep.txt": "deep"} {
		_ = tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
		_, _ = tw.Write([]byte(body))
	}
	tw.Close()
	ctx := ctxFor(t, waitShort)
	if err := d.c.PutFiles(ctx, "files", &in); err != nil {
		t.Fatal(err)
	}
	d.start("files", `cd "$SHELLJOB_OUT" && tr a-z A-Z < in.txt > out.txt && cat sub/deep.txt && ln -s /etc/passwd link && mkfifo pipe`, false)
	if got := d.output("files"); got != "deep" {
		t.Errorf("output %q", got)
	}
	var out bytes.Buffer
	if err := d.c.GetFiles(ctx, "files", 0, &out); err != nil {
		t.Fatal(err)
	}
	// The job has ended: its stream from an offset is the rest of it.
	whole := bytes.Clone(out.Bytes())
	for _, offset := range []int64{1, 700, int64(len(whole))} {
		var rest bytes.Buffer
		if err := d.c.GetFiles(ctx, "files", offset, &rest); err != nil || !bytes.Equal(rest.Bytes(), whole[offset:]) {
			t.Errorf("files from offset %d: %d bytes, %v; want the stream's last %d", offset, rest.Len(), err, len(whole)-int(offset))
		}
	}
	got := map[string]string{}
	tr := tar.NewReader(&out)
	for {
		h, err := tr.Next()
		if err != nil {
			if err != io.EOF {
				t.Fatal(err)
			}
			break
		}
		b, _ := io.ReadAll(tr)
		got[h.Name] = string(h.Typeflag) + ":" + string(b) + h.Linkname
	}
	want := map[string]string{
		"in.txt": "0:hello", "out.txt": "0:HELLO", "sub/": "5:", "sub/deep.txt": "0:deep", "link": "2:/etc/passwd",
	}
	if len(got) != len(want) {
		t.Errorf("files %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
	if err := d.c.PutFiles(ctx, "files", bytes.NewReader(in.Bytes())); !errors.Is(err, agentapi.ErrStarted) {
		t.Errorf("put after the start: %v, want ErrStarted", err)
	}
	var evil bytes.Buffer
	tw = tar.NewWriter(&evil)
	_ = tw.WriteHeader(&tar.Header{Name: "../escape", Mode: 0o644, Size: 1, Typeflag: tar.TypeReg})
	_, _ = tw.Write([]byte("x"))
	tw.Close()
	if err := d.c.PutFiles(ctx, "evil", &evil); err == nil {
		t.Error("a tar entry outside the directory was accepted")
	}
	if err := d.c.GetFiles(ctx, "nosuch", 0, io.Discard); !errors.Is(err, agentapi.ErrUnknownJob) {
		t.Errorf("get files of an unknown job: %v", err)
	}
}

// tarOf is a tar stream of regular files, name to content, in order.
func tarOf(files ...string) []byte {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for i := 0; i+1 < len(files); i += 2 {
		_ = tw.WriteHeader(&tar.Header{Name: files[i], Mode: 0o644, Size: int64(len(files[i+1])), Typeflag: tar.TypeReg})
		_, _ = tw.Write([]byte(files[i+1]))
	}
	tw.Close()
	return b.Bytes()
}

// TestPutFilesEscapesNothing: a put writes nothing outside the job's
// directory through a link in it, in a directory on the way or at the
// end, and leaves what the link names as it was.
func TestPutFilesEscapesNothing(t *testing.T) {
	d := startDaemon(t)
	outside := agenttest.TempDir(t)
	files := filepath.Join(d.dir, "jobs", "linked", "files")
	if err := os.MkdirAll(files, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, to := range map[string]string{"dir": outside, "file": filepath.Join(outside, "victim")} {
		if err := os.Symlink(to, filepath.Join(files, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "victim"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"dir/planted", "dir/sub/planted", "file"} {
		if err := d.c.PutFiles(ctxFor(t, waitShort), "linked", bytes.NewReader(tarOf(name, "x"))); err == nil {
			t.Errorf("a put of %s through a link was accepted", name)
		}
	}
	ents, _ := os.ReadDir(outside)
	if len(ents) != 1 {
		t.Errorf("the put wrote outside the job's files: %v", ents)
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "victim")); string(b) != "kept" {
		t.Errorf("the file a link names holds %q", b)
	}
}

// TestPutFilesBeforeTheStart: a start that comes while files are being
// put waits for the put, so that the command finds all of them; a put
// after the start is refused, even one that was waiting.
func TestPutFilesBeforeTheStart(t *testing.T) {
	d := startDaemon(t)
	body := tarOf("first", "1", "second", "2")
	pr, pw := io.Pipe()
	put := make(chan error, 1)
	go func() { put <- d.c.PutFiles(ctxFor(t, waitLong), "slow", pr) }()
	// The first file, and only part of the stream: the put is under way.
	if _, err := pw.Write(body[:1024]); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(waitShort); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(d.jobFile("slow", "first")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the put never began")
		}
	}
	started := make(chan error, 1)
	go func() {
		_, err := d.c.Start(ctxFor(t, waitLong), agentapi.StartRequest{Job: "slow", Command: `ls "$SHELLJOB_OUT"`})
		started <- err
	}()
	select {
	case err := <-started:
		t.Fatalf("the job started while its files were being put (%v)", err)
	case <-time.After(500 * time.Millisecond):
	}
	if _, err := pw.Write(body[1024:]); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if err := <-put; err != nil {
		t.Fatalf("put: %v", err)
	}
	if err := <-started; err != nil {
		t.Fatalf("start: %v", err)
	}
	if got := d.output("slow"); got != "first\nsecond\n" {
		t.Errorf("the command found %q, want both files", got)
	}
	if err := d.c.PutFiles(ctxFor(t, waitShort), "slow", bytes.NewReader(body)); !errors.Is(err, agentapi.ErrStarted) {
		t.Errorf("put after the start: %v, want ErrStarted", err)
	}
}

// TestFilesCounted: the exit event counts the regular files the job left
// in $SHELLJOB_OUT, in subdirectories and its inputs included, and their
// bytes; a restarted agent reports the same, and counts those of a job it
// lost too.
func TestFilesCounted(t *testing.T) {
	d := startDaemon(t)
	var in bytes.Buffer
	tw := tar.NewWriter(&in)
	_ = tw.WriteHeader(&tar.Header{Name: "in.txt", Mode: 0o644, Size: 5, Typeflag: tar.TypeReg})
	_, _ = tw.Write([]byte("hello"))
	tw.Close()
	if err := d.c.PutFiles(ctxFor(t, waitShort), "some", &in); err != nil {
		t.Fatal(err)
	}
	d.start("none", "echo no files", false)
	d.start("some", `cd "$SHELLJOB_OUT" && mkdir -p a/b empty && printf 123 > top && printf 1234567 > a/b/deep && `+
		`ln -s /etc/passwd link && mkfifo pipe`, false)
	d.start("stateful", `print -n xy > "$SHELLJOB_OUT/s"`, true)
	want := map[string]agentapi.Files{
		"none":     {},
		"some":     {Count: 3, Bytes: 5 + 3 + 7},
		"stateful": {Count: 1, Bytes: 2},
	}
	check := func(when string) {
		t.Helper()
		for id, w := range want {
			e := d.exited(id)
			if e.Files == nil || *e.Files != w {
				t.Errorf("%s: %s: files %+v, want %+v", when, id, e.Files, w)
			}
		}
	}
	check("at the end")
	d.stop()
	d.run()
	check("after an agent restart")

	resp := d.start("lost", `printf abcd > "$SHELLJOB_OUT/f"; echo written; sleep 100`, false)
	t.Cleanup(func() { _ = syscall.Kill(-resp.PGID, syscall.SIGKILL) })
	d.waitOutput("lost", "written")
	d.crash()
	d.run()
	if e := d.exited("lost"); !e.Lost || e.Files == nil || *e.Files != (agentapi.Files{Count: 1, Bytes: 4}) {
		t.Errorf("a job lost to a crash: %+v, want its file counted", e)
	}
}

func TestUnknownJob(t *testing.T) {
	d := startDaemon(t)
	ctx := ctxFor(t, waitShort)
	if _, err := d.c.Signal(ctx, "nosuch", agentapi.SIGINT); !errors.Is(err, agentapi.ErrUnknownJob) {
		t.Errorf("signal: %v", err)
	}
	if _, err := d.c.Follow(ctx, "nosuch", 0, io.Discard); !errors.Is(err, agentapi.ErrUnknownJob) {
		t.Errorf("follow: %v", err)
	}
	if _, err := d.c.Start(ctx, agentapi.StartRequest{Job: "../x", Command: "true"}); err == nil {
		t.Error("a job id with a slash was accepted")
	}
}

func TestShutdownStopsJobs(t *testing.T) {
	d := startDaemon(t)
	d.start("long", "sleep 100", false)
	d.stop()
	d.run()
	e := d.exited("long")
	if e.Lost || e.ExitCode == nil || *e.ExitCode != 143 {
		t.Errorf("a job the agent stopped on its way out: %+v", e)
	}
}

// TestShutdownMarksExit: a job the agent stops because it is ending says
// so, and one that ended on its own does not.
func TestShutdownMarksExit(t *testing.T) {
	d := startDaemon(t)
	d.start("before", "true", false)
	d.output("before")
	d.start("long", "sleep 100", false)
	d.stop()
	d.run()
	if e := d.exited("long"); !e.Shutdown {
		t.Errorf("a job the agent stopped on its way out: %+v, want Shutdown", e)
	}
	if e := d.exited("before"); e.Shutdown {
		t.Errorf("a job that ended before the agent did: %+v, want no Shutdown", e)
	}
}

// TestOOMKillsAttributed: the exit event counts the out-of-memory kills of
// the container's cgroup (cgroup v1 and v2 layouts) that killed the job's
// own processes, and none of a neighbour's that ran beside it and failed
// for its own reasons; whether jobs run as users of their own or not.
func TestOOMKillsAttributed(t *testing.T) {
	for _, layout := range []string{"memory.events", "memory/memory.oom_control"} {
		for _, isolation := range []string{"auto", "off"} {
			t.Run(layout+"/"+isolation, func(t *testing.T) {
				// The hog plays the kernel: whatever user it runs as, it may
				// write the file, and it kills its own processes.
				root := agenttest.TempDir(t)
				file := filepath.Join(root, layout)
				if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, []byte("oom 9\noom_kill 3\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(file, 0o666); err != nil {
					t.Fatal(err)
				}
				d := startDaemon(t, "--cgroup-root", root, "--isolation", isolation)
				d.start("neighbour", "print ready; sleep 3; exit 3", false)
				d.waitOutput("neighbour", "ready")
				// Two victims, each seen alive before the kernel counts it.
				d.start("hog", fmt.Sprintf(`sleep 100 & a=$!; sleep 100 & b=$!; sleep 1; `+
					`printf 'oom 9\noom_kill 5\n' > %q; kill -9 $a $b; wait; exit 1`, file), false)
				if e := d.exited("hog"); e.OOMKills != 2 || code(t, e) != 1 {
					t.Errorf("a job whose two processes the OOM killer killed: %+v, want OOMKills 2, exit 1", e)
				}
				if e := d.exited("neighbour"); e.OOMKills != 0 || code(t, e) != 3 {
					t.Errorf("a job that ran beside them and failed for its own reasons: %+v, want OOMKills 0, exit 3", e)
				}
				d.start("calm", "true", false)
				if e := d.exited("calm"); e.OOMKills != 0 {
					t.Errorf("a job during which the OOM killer did nothing: %+v", e)
				}
			})
		}
	}
}

// A control channel gets an empty message every keepalive while the
// daemon answers, and none once it stops answering (SIGSTOP).
func TestControlKeepalives(t *testing.T) {
	d := startDaemon(t)
	in, caller := io.Pipe()
	defer caller.Close()
	var out utiltesting.SyncBuffer
	done := make(chan error, 1)
	go func() {
		done <- d.c.Control(context.Background(), in, &out, agent.ControlOptions{Keepalive: 50 * time.Millisecond})
	}()
	empty := func() int { return strings.Count(out.String(), "{}\n") }
	for deadline := time.Now().Add(waitShort); empty() < 4; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("keepalives: %q", out.String())
		}
	}
	resume := d.p.Pause(t)
	before := empty()
	time.Sleep(500 * time.Millisecond)
	// One answered just before the pause may still go out.
	if n := empty(); n > before+1 {
		t.Errorf("%d keepalives from a stopped daemon", n-before)
	}
	resume()
	for deadline := time.Now().Add(waitShort); empty() < before+3; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no keepalives once the daemon answers again: %q", out.String())
		}
	}
	caller.Close()
	if err := <-done; err != nil {
		t.Errorf("control ended with %v", err)
	}
}

// With an idle limit, a get-files stream from a daemon that stops
// answering mid-stream (SIGSTOP) is cut.
func TestGetFilesOfAStoppedDaemon(t *testing.T) {
	d := startDaemon(t)
	d.start("big", `head -c 16777216 /dev/zero > "$SHELLJOB_OUT/big"`, false)
	d.exited("big")
	pods := agent.Pods{Socket: func(types.NamespacedName) string { return agent.SocketPath(d.dir) }, StreamIdle: time.Second}
	var n atomic.Int64
	w := writerFunc(func(p []byte) (int, error) {
		if n.Add(int64(len(p))) == int64(len(p)) {
			d.p.Pause(t)
		}
		return len(p), nil
	})
	err := pods.GetFiles(ctxFor(t, waitLong), types.NamespacedName{}, "big", 0, w)
	if !errors.Is(err, agentapi.ErrStreamIdle) {
		t.Errorf("get-files: %v after %d bytes, want ErrStreamIdle", err, n.Load())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// FollowText makes the final text of an ended job in the agent: escaped,
// rendered when asked, the not-kept line in place, framed with keepalives
// while the output waits.
func TestFollowText(t *testing.T) {
	d := startDaemon(t, "--follow-keepalive", "100ms")
	d.start("quiet", `sleep 0.5; printf done`, false)
	var wire utiltesting.SyncBuffer
	if err := d.c.FollowText(ctxFor(t, waitLong), "quiet", agentapi.TextRendered, &wire); err != nil {
		t.Fatal(err)
	}
	if want := agentapi.TextMagic + "d 0\n"; !strings.HasPrefix(wire.String(), want) {
		t.Errorf("the stream starts %q, want %q: a keepalive while the command sleeps", wire.String(), want)
	}

	d.start("text", `printf 'a\xff\x1b[31mred\x1b[0m\rR\n'; printf '10%%\r50%%\r100%%\n'; head -c 40M /dev/zero | tr '\0' 'x'; printf '\nend\xe2\x82'`, false)
	e := d.exited("text")
	wire = utiltesting.SyncBuffer{}
	if err := d.c.FollowText(ctxFor(t, waitLong), "text", agentapi.TextRendered, &wire); err != nil {
		t.Fatal(err)
	}
	var rendered strings.Builder
	if err := agentapi.ReadText(strings.NewReader(wire.String()), agentapi.TextRendered, &rendered); err != nil {
		t.Fatal(err)
	}
	gap := agentapi.GapLine(e.DroppedBytes)
	head, tail, ok := strings.Cut(rendered.String(), gap)
	if !ok {
		t.Fatalf("no %q in the %d bytes of text", gap, rendered.Len())
	}
	if want := "R\\xffred\n100%\n"; !strings.HasPrefix(head, want) {
		t.Errorf("text starts %q, want %q", head[:min(len(head), 40)], want)
	}
	if want := "\nend\\xe2\\x82"; !strings.HasSuffix(tail, want) {
		t.Errorf("text ends %q, want %q", tail[max(0, len(tail)-40):], want)
	}

	var escaped strings.Builder
	if err := d.c.FollowText(ctxFor(t, waitLong), "text", agentapi.TextEscaped, &escaped); err != nil {
		t.Fatal(err)
	}
	var plain strings.Builder
	if err := agentapi.ReadText(strings.NewReader(escaped.String()), agentapi.TextEscaped, &plain); err != nil {
		t.Fatal(err)
	}
	if want := "a\\xff\x1b[31mred\x1b[0m\rR\n"; !strings.HasPrefix(plain.String(), want) {
		t.Errorf("escaped text starts %q, want %q", plain.String()[:min(plain.Len(), 40)], want)
	}
	var raw bytes.Buffer
	if _, err := d.c.Follow(ctxFor(t, waitLong), "text", 0, &raw); err != nil {
		t.Fatal(err)
	}
	if want := liveoutput.DecodeEscape(raw.Bytes()); plain.String() != want {
		t.Errorf("escaped text: %d bytes, want the follow's %d, escaped", plain.Len(), len(want))
	}
}

// TestExitTellsSignals: the exit event names the signals sent when asked,
// so that an operator that did not live to record its stop learns it; a
// signal after the command ended and the agent's own stop on its way out
// are not among them.
func TestExitTellsSignals(t *testing.T) {
	d := startDaemon(t)
	d.start("stopped", "sleep 100", false)
	d.signal("stopped", agentapi.SIGINT)
	if e := d.exited("stopped"); len(e.Signals) != 1 || e.Signals[0].Signal != agentapi.SIGINT || e.Signals[0].Time.IsZero() {
		t.Errorf("a stopped job's exit: signals %+v, want SIGINT", e.Signals)
	}

	d.start("ended", "true", false)
	d.output("ended")
	d.exited("ended")
	d.signal("ended", agentapi.SIGINT)
	if e := d.exited("ended"); len(e.Signals) != 0 {
		t.Errorf("a job signalled after its end: signals %+v, want none", e.Signals)
	}

	d.start("long", "sleep 100", false)
	d.stop()
	d.run()
	if e := d.exited("long"); !e.Shutdown || len(e.Signals) != 0 {
		t.Errorf("a job the agent stopped on its way out: %+v, want Shutdown and no signals", e)
	}
}
