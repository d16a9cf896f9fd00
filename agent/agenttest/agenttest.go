package agenttest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"shelljob.dev/shelljob/agent"
	"shelljob.dev/shelljob/agent/cli"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

// asAgent, set to 1, makes the test binary run as shelljob-agent.
const asAgent = "SHELLJOB_AGENT_TEST_MAIN"

// wait bounds the start and the stop of a daemon.
const wait = 10 * time.Second

// Main is a TestMain: in a process started by Command it runs the agent's
// command line, otherwise the tests.
func Main(m *testing.M) {
	RunIfAgent()
	os.Exit(m.Run())
}

// RunIfAgent runs the agent's command line and exits, in a process started
// by Command; otherwise it returns at once. A TestMain other than Main
// calls it first.
func RunIfAgent() {
	if os.Getenv(asAgent) == "1" {
		os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
}

// Command runs the test binary as shelljob-agent with args. Its Env is set:
// append to it, do not replace it.
func Command(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), asAgent+"=1")
	return cmd
}

// forkSlices counts the daemons ForkUIDs gave users to.
var forkSlices atomic.Int64

// ForkUIDs is the agent's flag that gives a daemon Fork users of its own:
// the daemons of a test, and of the test processes of one `go test ./...`,
// run jobs on one machine at once, and an ended job's user has its
// processes killed and its files in /tmp removed, which must be no other
// daemon's job's. Each call gives the next slice, from one that depends on
// the process.
func ForkUIDs() string {
	const slice = 200
	n := int64(agent.ForkUIDCount / slice)
	first := agent.ForkUIDBase + int((int64(os.Getpid())*7+forkSlices.Add(1))%n)*slice
	return fmt.Sprintf("--fork-uids=%d-%d", first, first+slice-1)
}

// NeedZsh fails the test when zsh, the shell of the jobs, is missing.
func NeedZsh(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("zsh"); err != nil {
		t.Fatal("these tests run real commands in zsh: apt-get install -y zsh")
	}
}

// TempDir is a t.TempDir that the users of an isolating agent's commands
// can reach: the test's own temporary directory is closed to them (0700).
func TempDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	for _, p := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(p, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// Serve runs a daemon on a fresh spool directory, with args after
// "serve --spool-dir DIR", until the end of the test, and returns the
// directory. The daemon's log is in the test's output if the test fails.
func Serve(t testing.TB, args ...string) string {
	t.Helper()
	dir, _ := ServeProcess(t, args...)
	return dir
}

// ServeProcess is Serve, and returns the daemon's process too.
func ServeProcess(t testing.TB, args ...string) (string, *Process) {
	t.Helper()
	NeedZsh(t)
	dir := TempDir(t)
	p, err := serve(t, dir, "agent", args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return dir, p
}

// serve starts a daemon on spool directory dir, with args after
// "serve --spool-dir DIR", and waits until it answers. Its log, named name,
// is in the test's output if the test fails. It may run on any goroutine.
func serve(t testing.TB, dir, name string, args ...string) (*Process, error) {
	logs := &utiltesting.SyncBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log of %s:\n%s", name, logs.String())
		}
	})
	cmd := Command(append([]string{"serve", "--spool-dir", dir, ForkUIDs()}, args...)...)
	cmd.Stderr = logs
	return start(cmd, agent.SocketPath(dir))
}

// Process is a daemon started by Start.
type Process struct {
	cmd   *exec.Cmd
	ended chan struct{}
}

// Start starts cmd, a daemon made by Command, and waits until it answers
// on socket. The daemon is stopped at the end of the test, if not before.
func Start(t testing.TB, cmd *exec.Cmd, socket string) *Process {
	t.Helper()
	p, err := start(cmd, socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

// start is Start, for any goroutine: a daemon that does not answer is
// killed, and the error says so.
func start(cmd *exec.Cmd, socket string) (*Process, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{cmd: cmd, ended: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.ended)
	}()
	c := agent.NewClient(socket)
	deadline := time.Now().Add(wait)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx)
		cancel()
		if err == nil {
			return p, nil
		}
		if time.Now().After(deadline) {
			p.Kill()
			return nil, fmt.Errorf("agent not answering: %w", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Pid is the agent's process ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Stop ends the daemon as a pod's deletion would: SIGTERM, then SIGKILL if
// it has not ended within 10 s. It returns once the daemon has ended.
func (p *Process) Stop() {
	select {
	case <-p.ended:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.ended:
	case <-time.After(wait):
		_ = p.cmd.Process.Kill()
		<-p.ended
	}
}

// Pause stops the daemon with SIGSTOP, as a worker that stops answering,
// until resume, which the end of the test calls if the test does not. It
// may run on any goroutine.
func (p *Process) Pause(t testing.TB) (resume func()) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Errorf("pause the agent: %v", err)
	}
	// The signal is sent, not yet taken: wait until the kernel shows the
	// process stopped, so that nothing the caller asks next is answered.
	stat := fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		b, err := os.ReadFile(stat)
		if i := bytes.LastIndexByte(b, ')'); err == nil && i >= 0 && i+2 < len(b) && b[i+2] == 'T' {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("the agent %d did not stop: %v %q", p.cmd.Process.Pid, err, b)
			break
		}
	}
	var once sync.Once
	resume = func() { once.Do(func() { _ = p.cmd.Process.Signal(syscall.SIGCONT) }) }
	t.Cleanup(resume)
	return resume
}

// Kill ends the daemon without letting it stop anything, as a crash would.
func (p *Process) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.ended
}

// WaitOutput follows job with c until its output holds want, for a minute at
// most, and fails the test if it never does.
func WaitOutput(t testing.TB, c *agent.Client, job, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w := &watchWriter{want: want, found: cancel}
	_, err := c.Follow(ctx, job, 0, w)
	if !strings.Contains(w.b.String(), want) {
		t.Fatalf("output of %s is %q, never held %q (%v)", job, w.b.String(), want, err)
	}
}

// watchWriter calls found once what it was written holds want.
type watchWriter struct {
	b     bytes.Buffer
	want  string
	found func()
}

func (w *watchWriter) Write(p []byte) (int, error) {
	w.b.Write(p)
	if strings.Contains(w.b.String(), w.want) {
		w.found()
	}
	return len(p), nil
}

// ConsoleShell is a Console job's command for tests: an interactive zsh
// with no startup file, whose prompt, "READY> ", is easy to find.
const ConsoleShell = `PS1='READY> ' exec zsh -f -i`

// MaxCommand is the API's limit on a command, in bytes
// (ShellJobSpec.Command).
const MaxCommand = 64 << 10

// EscapedCommand is a command of n bytes (n >= 6) that JSON escapes to
// almost six times that: `echo a > /dev/null && ` repeated, then an echo
// of x's, whose output is out.
func EscapedCommand(n int) (cmd, out string) {
	return echoPadded(strings.Repeat("echo a > /dev/null && ", (n-len("echo x"))/22), n)
}

// PlainCommand is a command of n bytes (n >= 6) of plain ASCII, an echo of
// x's, whose output is out.
func PlainCommand(n int) (cmd, out string) { return echoPadded("", n) }

// echoPadded appends to prefix the echo that makes it n bytes long.
func echoPadded(prefix string, n int) (cmd, out string) {
	arg := strings.Repeat("x", n-len(prefix)-len("echo "))
	return prefix + "echo " + arg, arg + "\n"
}
