package agent_test

import (
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"shelljob.dev/shelljob/agent/agenttest"
	"shelljob.dev/shelljob/agent/pty"
	"shelljob.dev/shelljob/internal/agentapi"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

const consoleShell = agenttest.ConsoleShell

// startConsole starts Console job id with command.
func (d *daemon) startConsole(id, command string) agentapi.StartResponse {
	d.t.Helper()
	resp, err := d.c.Start(ctxFor(d.t, waitShort), agentapi.StartRequest{Job: id, Command: command, Console: true})
	if err != nil {
		d.t.Fatalf("start console %s: %v", id, err)
	}
	return resp
}

// attach runs the attach subcommand of job id, with args, on a
// terminal of rows×cols.
func (d *daemon) attach(t *testing.T, id string, rows, cols uint16, args ...string) *agenttest.Attachment {
	t.Helper()
	return agenttest.Attach(t, d.dir, id, rows, cols, args...)
}

// exitCode waits for the attach to end and returns its exit code.
func exitCode(t *testing.T, a *agenttest.Attachment) int {
	t.Helper()
	return a.Wait().ExitCode()
}

// TestConsole: a console runs its shell on a terminal that is its user's,
// not root's; what is typed into the attach runs and its output comes
// back; a resize of the attach's terminal reaches the shell's; exit 3
// ends the job with 3 and the attach with 3; and the spool holds the
// session, in both ways of isolating jobs.
func TestConsole(t *testing.T) {
	for _, mode := range sandboxModes {
		t.Run(mode.name, func(t *testing.T) {
			d, _ := isolated(t, mode.flags...)
			d.startConsole("c", consoleShell)
			a := d.attach(t, "c", 30, 100)
			a.WaitScreen("READY> ")
			uid := d.uidOf("c")
			a.TypeLine(`print answer=$((6*7)) uid=$(id -u) tty=$(stat -c %u $TTY) size=$(stty size | tr ' ' x)`)
			m := a.WaitScreen(`answer=42 uid=(\d+) tty=(\d+) size=(\S+)`)
			if m[1] != strconv.Itoa(uid) || m[2] != m[1] || uid == 0 {
				t.Errorf("the shell runs as %s on a terminal of %s; want the job's user %d for both", m[1], m[2], uid)
			}
			if m[3] != "30x100" {
				t.Errorf("the console's size is %s, want the attach's 30x100", m[3])
			}
			// The resize reaches the attach as SIGWINCH, which sends it on;
			// the shell is asked until it has it.
			if err := pty.SetSize(a.Master, 40, 140); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(waitLong)
			for n := 0; !strings.Contains(a.Screen.String(), "resized=40x140"); n++ {
				if time.Now().After(deadline) {
					t.Fatalf("the shell never saw the new size:\n%q", a.Screen.String())
				}
				a.TypeLine(fmt.Sprintf(`print resized=$(stty size | tr ' ' x) try=%d`, n))
				a.WaitScreen(fmt.Sprintf(`resized=\S+ try=%d`, n))
			}
			a.TypeLine("exit 3")
			if code := exitCode(t, a); code != 3 {
				t.Errorf("the attach exited %d, want the shell's 3; screen:\n%q", code, a.Screen.String())
			}
			if got := code(t, d.exited("c")); got != 3 {
				t.Errorf("the console ended with %d, want 3", got)
			}
			if out := d.output("c"); !strings.Contains(out, "answer=42") || !strings.Contains(out, "resized=40x140") {
				t.Errorf("the spool lacks the session:\n%q", out)
			}
			if left := userProcesses(uid); len(left) > 0 {
				t.Errorf("processes %v of the console's user %d are left", left, uid)
			}
		})
	}
}

// TestConsoleHungUpWhenTheAttachEnds: an attach that ends while its
// console runs, its exec cut (its terminal closed under it) or its input
// ended, hangs the console up: the shell ends of SIGHUP, and nothing of
// its user is left, its background jobs included.
func TestConsoleHungUpWhenTheAttachEnds(t *testing.T) {
	d, _ := isolated(t)
	d.startConsole("cut", consoleShell)
	a := d.attach(t, "cut", 24, 80)
	a.WaitScreen("READY> ")
	a.TypeLine("sleep 1000 &!; print started")
	a.WaitScreen("started")
	a.Master.Close()
	if got := code(t, d.exited("cut")); !hungUp(got) {
		t.Errorf("the console ended with %d, not of a hangup", got)
	}
	exitCode(t, a)
	if uid := d.uidOf("cut"); len(userProcesses(uid)) > 0 {
		t.Errorf("processes %v of the console's user %d are left", userProcesses(uid), uid)
	}

	// An attach without a terminal, whose input ends.
	d.startConsole("eof", consoleShell)
	var screen utiltesting.SyncBuffer
	code, err := d.c.Attach(ctxFor(t, waitLong), "eof", &promptThenEOF{screen: &screen, typed: "print typed\r"}, &screen, nil)
	if err != nil || !hungUp(code) {
		t.Errorf("attach with an input that ends: %d, %v; want the status of a hangup", code, err)
	}
	if !strings.Contains(screen.String(), "typed") {
		t.Errorf("the input never ran: %q", screen.String())
	}
}

// hungUp tells whether a console's exit status is its shell's after a
// hangup: zsh exits with the signal's number, 1; a shell that dies of it
// reports 129. A shell that outlived it, killed StopGrace later, reports
// 137.
func hungUp(code int) bool { return code == int(syscall.SIGHUP) || code == 128+int(syscall.SIGHUP) }

// promptThenEOF is an attach's input: typed once the screen shows the
// prompt, then EOF.
type promptThenEOF struct {
	screen *utiltesting.SyncBuffer
	typed  string
	done   bool
}

func (p *promptThenEOF) Read(b []byte) (int, error) {
	if p.done {
		// Once the output came back: the input ended after it ran.
		for deadline := time.Now().Add(waitLong); !strings.Contains(p.screen.String(), "\ntyped") && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
		}
		return 0, io.EOF
	}
	for deadline := time.Now().Add(waitLong); !strings.Contains(p.screen.String(), "READY> ") && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	p.done = true
	return copy(b, p.typed), nil
}

// TestConsoleUnattended: a console nobody attaches to is hung up once the
// agent's attach wait has passed.
func TestConsoleUnattended(t *testing.T) {
	d := startDaemon(t, "--console-attach-wait=1s")
	d.startConsole("lonely", consoleShell)
	if got := code(t, d.exited("lonely")); !hungUp(got) {
		t.Errorf("the unattended console ended with %d, not of a hangup", got)
	}
}

// TestConsoleOneAttachAtATime: a second attach while one is on is refused
// with ErrAttached, by the client as by the subcommand (ExitAttached); an
// attach waits for its console's start; a job that is no console takes
// none; and the stop ladder ends a console as any job.
func TestConsoleOneAttachAtATime(t *testing.T) {
	d := startDaemon(t)
	first := make(chan error, 1)
	in, typing := io.Pipe()
	defer typing.Close()
	var screen utiltesting.SyncBuffer
	go func() {
		// Before the start: it waits for it.
		_, err := d.c.Attach(ctxFor(t, waitLong), "one", in, &screen, nil)
		first <- err
	}()
	time.Sleep(100 * time.Millisecond)
	d.startConsole("one", consoleShell)
	for deadline := time.Now().Add(waitLong); !strings.Contains(screen.String(), "READY> "); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the first attach never showed the prompt: %q", screen.String())
		}
	}
	_, err := d.c.Attach(ctxFor(t, waitShort), "one", strings.NewReader(""), io.Discard, nil)
	if !errors.Is(err, agentapi.ErrAttached) {
		t.Errorf("a second attach: %v, want ErrAttached", err)
	}
	cmd := agenttest.Command("attach", "--spool-dir", d.dir, "--job", "one")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != agentapi.ExitAttached || !strings.Contains(string(out), "one attach at a time") {
		t.Errorf("a second attach subcommand: %v, %q; want exit %d", err, out, agentapi.ExitAttached)
	}

	d.start("plain", "print plain", false)
	if _, err := d.c.Attach(ctxFor(t, waitShort), "plain", strings.NewReader(""), io.Discard, nil); err == nil ||
		!strings.Contains(err.Error(), "no console") {
		t.Errorf("attach to a Fork job: %v", err)
	}

	if _, err := io.WriteString(typing, "print sleeping; sleep 1000\r"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(waitLong); !strings.Contains(screen.String(), "\nsleeping"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the command never ran: %q", screen.String())
		}
	}
	ctx := ctxFor(t, waitLong)
	if err := d.c.Stop(ctx, "one", 100*time.Millisecond, nil); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if got := code(t, d.exited("one")); got != 128+int(syscall.SIGKILL) {
		t.Errorf("the stopped console ended with %d, want %d (SIGKILL)", got, 128+int(syscall.SIGKILL))
	}
	if err := <-first; err != nil {
		t.Errorf("the first attach: %v", err)
	}
}

// TestConsoleHangup: a hangup of its attach's session ends an attached
// console whose attach never learns that its exec was cut, as under a
// runtime that keeps a cut TTY exec's terminal open and reads it no more,
// so that the attach is stuck writing to it: the attach's process is
// killed, the console ends of the hangup, and nothing of its user is
// left. A new attach right after it is not refused, but gets the
// console's end; a hangup again, of the session or of none, does nothing.
func TestConsoleHangup(t *testing.T) {
	d, _ := isolated(t)
	d.startConsole("cut", consoleShell)
	a := d.attach(t, "cut", 24, 80, "--session=s1")
	a.WaitScreen("READY> ")
	uid := d.uidOf("cut")
	a.TypeLine("sleep 1000 &!; print started")
	a.WaitScreen("started")
	a.Stall()
	// More output than the terminal and the socket hold: the attach is
	// stuck writing it.
	a.TypeLine("print -l {1..200000}; print printed")
	d.waitOutput("cut", "\nprinted")

	if err := d.c.Hangup(ctxFor(t, waitShort), "cut", "s1"); err != nil {
		t.Fatalf("hangup: %v", err)
	}
	again := d.attach(t, "cut", 24, 80, "--session=s2")
	if !a.Killed() {
		t.Errorf("the stuck attach ended with %v, want killed", a.Cmd.ProcessState)
	}
	got := code(t, d.exited("cut"))
	if !hungUp(got) {
		t.Errorf("the console ended with %d, not of a hangup", got)
	}
	if code := exitCode(t, again); code != got {
		t.Errorf("the attach after the hangup exited %d, want the console's %d; screen:\n%q", code, got, tail(again.Screen.String()))
	}
	if left := userProcesses(uid); len(left) > 0 {
		t.Errorf("processes %v of the console's user %d are left", left, uid)
	}
	for _, session := range []string{"s1", ""} {
		if err := d.c.Hangup(ctxFor(t, waitShort), "cut", session); err != nil {
			t.Errorf("hangup %q of the ended console: %v", session, err)
		}
	}
}

// TestConsoleHangupOfAnotherAttach: a hangup that names an attach that is
// not the console's (one refused as a second attach) leaves the console
// and its attach alone; one of no session hangs the console up, whatever
// its attach; a job that is no console is refused and left alone, by the
// client as by the subcommand.
func TestConsoleHangupOfAnotherAttach(t *testing.T) {
	d := startDaemon(t)
	d.startConsole("live", consoleShell)
	a := d.attach(t, "live", 24, 80, "--session=mine")
	a.WaitScreen("READY> ")
	second := agenttest.Command("attach", "--spool-dir", d.dir, "--job", "live", "--session=second")
	if out, err := second.CombinedOutput(); second.ProcessState.ExitCode() != agentapi.ExitAttached {
		t.Fatalf("a second attach: %v, %q; want it refused", err, out)
	}
	if err := d.c.Hangup(ctxFor(t, waitShort), "live", "second"); err != nil {
		t.Errorf("hangup of the refused attach: %v", err)
	}
	a.TypeLine("print still=$((6*7))")
	a.WaitScreen("still=42")

	d.start("plain", "sleep 1000", false)
	if err := d.c.Hangup(ctxFor(t, waitShort), "plain", ""); err == nil || !strings.Contains(err.Error(), "no console") {
		t.Errorf("hangup of a Fork job: %v, want it refused", err)
	}
	cmd := agenttest.Command("hangup", "--spool-dir", d.dir, "--job", "plain")
	if out, err := cmd.CombinedOutput(); cmd.ProcessState.ExitCode() != 1 || !strings.Contains(string(out), "no console") {
		t.Errorf("the hangup subcommand on a Fork job: %v, %q; want exit 1", err, out)
	}
	d.stillRunning("plain", time.Second)
	if err := d.c.Hangup(ctxFor(t, waitShort), "none", ""); !errors.Is(err, agentapi.ErrUnknownJob) {
		t.Errorf("hangup of no job: %v, want ErrUnknownJob", err)
	}

	cmd = agenttest.Command("hangup", "--spool-dir", d.dir, "--job", "live")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the hangup subcommand: %v, %q", err, out)
	}
	if got := code(t, d.exited("live")); !hungUp(got) {
		t.Errorf("the console ended with %d, not of a hangup", got)
	}
	if !a.Killed() {
		t.Errorf("the console's attach ended with %v, want killed", a.Cmd.ProcessState)
	}
}

// tail is the end of a screen, for a message.
func tail(screen string) string { return screen[max(0, len(screen)-512):] }
