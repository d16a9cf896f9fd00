package agenttest

import (
	"io"
	"os"
	"os/exec"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"

	"shelljob.dev/shelljob/agent/pty"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

// attachWait bounds each wait of an Attachment.
const attachWait = time.Minute

// Attachment is the agent's attach subcommand run on a terminal of the
// test's, as a TTY exec runs it in a worker pod: the test types into the
// terminal's master and reads the screen from it.
type Attachment struct {
	t testing.TB
	// Master is the terminal's master; Screen what was read from it.
	Master *os.File
	Screen *utiltesting.SyncBuffer
	// Cmd is the attach's process.
	Cmd   *exec.Cmd
	ended chan struct{}
	// reading is held while the screen is not read (Stall).
	reading sync.Mutex
}

// Attach runs the attach subcommand of job, with args, against the daemon
// of spoolDir, on a new pseudo-terminal of rows×cols, its controlling
// terminal. It is killed at the end of the test, if it has not ended. A
// machine without pseudo-terminals skips the test.
func Attach(t testing.TB, spoolDir, job string, rows, cols uint16, args ...string) *Attachment {
	t.Helper()
	a := &Attachment{t: t, Screen: &utiltesting.SyncBuffer{}, ended: make(chan struct{})}
	a.Cmd = Command(append([]string{"attach", "--spool-dir", spoolDir, "--job", job}, args...)...)
	master, err := StartOnTerminal(a.Cmd, rows, cols)
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	a.Master = master
	t.Cleanup(func() { master.Close() })
	t.Cleanup(func() {
		_ = a.Cmd.Process.Kill()
		<-a.ended
	})
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := master.Read(buf)
			a.reading.Lock()
			a.Screen.Write(buf[:n])
			a.reading.Unlock()
			if err != nil {
				return
			}
		}
	}()
	go func() {
		_ = a.Cmd.Wait()
		close(a.ended)
	}()
	return a
}

// StartOnTerminal starts cmd on a new pseudo-terminal, its standard
// streams and its controlling terminal, as a TTY exec runs its command,
// and returns the terminal's master. The terminal is rows×cols, unless
// both are 0.
func StartOnTerminal(cmd *exec.Cmd, rows, cols uint16) (*os.File, error) {
	master, slave, err := pty.Open()
	if err != nil {
		return nil, err
	}
	// The command holds the slave once it runs: the master reads EIO once
	// the last of its holders has closed it.
	defer slave.Close()
	if rows > 0 || cols > 0 {
		if err := pty.SetSize(master, rows, cols); err != nil {
			master.Close()
			return nil, err
		}
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		master.Close()
		return nil, err
	}
	return master, nil
}

// Stall stops reading the screen until the end of the test, as a runtime
// that keeps a cut exec's terminal open and reads it no more: once its
// buffers are full, the attach's writes to it block.
func (a *Attachment) Stall() {
	a.reading.Lock()
	a.t.Cleanup(a.reading.Unlock)
}

// TypeLine types line and Enter.
func (a *Attachment) TypeLine(line string) {
	a.t.Helper()
	if _, err := io.WriteString(a.Master, line+"\r"); err != nil {
		a.t.Fatalf("type %q: %v", line, err)
	}
}

// WaitScreen waits, a minute at most, until the screen matches re, and
// returns the match.
func (a *Attachment) WaitScreen(re string) []string {
	a.t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(attachWait)
	for {
		if m := rx.FindStringSubmatch(a.Screen.String()); m != nil {
			return m
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("the screen never showed %q:\n%q", re, a.Screen.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Wait waits, a minute at most, for the attach to end, and returns how it
// ended.
func (a *Attachment) Wait() *os.ProcessState {
	a.t.Helper()
	select {
	case <-a.ended:
		return a.Cmd.ProcessState
	case <-time.After(attachWait):
		a.t.Fatalf("the attach did not end; screen:\n%q", a.Screen.String())
		return nil
	}
}

// Killed tells whether the attach ended of SIGKILL; it waits as Wait.
func (a *Attachment) Killed() bool {
	a.t.Helper()
	ws, ok := a.Wait().Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}
