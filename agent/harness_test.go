package agent_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"shelljob.dev/shelljob/agent"
	"shelljob.dev/shelljob/agent/agenttest"
	"shelljob.dev/shelljob/internal/agentapi"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

func TestMain(m *testing.M) { agenttest.Main(m) }

// Generous bounds: tests assert behaviour, not speed, on a shared machine.
const (
	waitLong  = 60 * time.Second
	waitShort = 10 * time.Second
)

type daemon struct {
	t    testing.TB
	dir  string
	home string
	args []string
	// wrap, when set, is a command line that runs the daemon's.
	wrap []string
	p    *agenttest.Process
	logs *utiltesting.SyncBuffer
	c    *agent.Client
}

// startDaemon runs a daemon on a fresh spool directory, with extra flags.
func startDaemon(t *testing.T, extra ...string) *daemon { return startDaemonB(t, extra...) }

func startDaemonB(t testing.TB, extra ...string) *daemon {
	t.Helper()
	agenttest.NeedZsh(t)
	d := &daemon{t: t, dir: agenttest.TempDir(t), home: agenttest.TempDir(t), logs: &utiltesting.SyncBuffer{}}
	d.args = append([]string{"serve", "--spool-dir", d.dir, agenttest.ForkUIDs(), "--home", d.home, "-v", "2"}, extra...)
	d.c = agent.NewClient(agent.SocketPath(d.dir))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent log:\n%s", d.logs.String())
		}
	})
	d.run()
	return d
}

// run starts the daemon, first or again after stop or crash.
func (d *daemon) run() {
	d.t.Helper()
	cmd := agenttest.Command(d.args...)
	if len(d.wrap) > 0 {
		path, err := exec.LookPath(d.wrap[0])
		if err != nil {
			d.t.Fatal(err)
		}
		cmd.Path, cmd.Args = path, append(slices.Clone(d.wrap), cmd.Args...)
	}
	cmd.Stderr = d.logs
	d.p = agenttest.Start(d.t, cmd, agent.SocketPath(d.dir))
}

// stop ends the daemon as a pod's deletion would.
func (d *daemon) stop() { d.p.Stop() }

// crash ends the daemon without letting it stop anything.
func (d *daemon) crash() { d.p.Kill() }

func ctxFor(t testing.TB, timeout time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return ctx
}

func (d *daemon) start(id, command string, stateful bool) agentapi.StartResponse {
	d.t.Helper()
	resp, err := d.c.Start(ctxFor(d.t, waitShort), agentapi.StartRequest{Job: id, Command: command, Stateful: stateful})
	if err != nil {
		d.t.Fatalf("start %s: %v", id, err)
	}
	if resp.PGID <= 0 || resp.StartedAt.IsZero() {
		d.t.Fatalf("start %s: %+v", id, resp)
	}
	return resp
}

func (d *daemon) signal(id string, sig agentapi.Signal) agentapi.SignalResponse {
	d.t.Helper()
	resp, err := d.c.Signal(ctxFor(d.t, waitShort), id, sig)
	if err != nil {
		d.t.Fatalf("signal %s %s: %v", id, sig, err)
	}
	return resp
}

// output follows the job from 0 to its end.
func (d *daemon) output(id string) string {
	d.t.Helper()
	var b bytes.Buffer
	if _, err := d.c.Follow(ctxFor(d.t, waitLong), id, 0, &b); err != nil {
		d.t.Fatalf("follow %s: %v", id, err)
	}
	return b.String()
}

// exited waits for the job's exited event.
func (d *daemon) exited(id string) agentapi.Event {
	d.t.Helper()
	e, err := d.waitEvent(waitLong, func(e agentapi.Event) bool { return e.Type == agentapi.EventExited && e.Job == id })
	if err != nil {
		d.t.Fatalf("waiting for %s to exit: %v", id, err)
	}
	return e
}

// stillRunning fails the test if the job exits within for.
func (d *daemon) stillRunning(id string, within time.Duration) {
	d.t.Helper()
	e, err := d.waitEvent(within, func(e agentapi.Event) bool { return e.Type == agentapi.EventExited && e.Job == id })
	if err == nil {
		d.t.Fatalf("%s exited too early: %+v", id, e)
	}
}

// waitEvent opens an events stream and returns the first event that
// matches, the snapshot included.
func (d *daemon) waitEvent(timeout time.Duration, match func(agentapi.Event) bool) (agentapi.Event, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var found *agentapi.Event
	err := d.c.Events(ctx, func(e agentapi.Event) {
		if found == nil && match(e) {
			found = &e
			cancel()
		}
	})
	if found != nil {
		return *found, nil
	}
	return agentapi.Event{}, err
}

// waitOutput follows the job until its output holds want.
func (d *daemon) waitOutput(id, want string) {
	d.t.Helper()
	agenttest.WaitOutput(d.t, d.c, id, want)
}

func (d *daemon) jobFile(id, name string) string {
	return filepath.Join(d.dir, "jobs", id, "files", name)
}

func code(t *testing.T, e agentapi.Event) int {
	t.Helper()
	if e.ExitCode == nil {
		t.Fatalf("exited without a code: %+v", e)
	}
	return *e.ExitCode
}

// waitProc waits until process group pgid runs a process named name. A
// stop sent while the shell is still starting that process could miss it:
// zsh forks it after the signal, or a forked zsh that has not yet become
// it runs the trap and repeats buffered output.
func waitProc(t *testing.T, pgid int, name string) {
	t.Helper()
	deadline := time.Now().Add(waitShort)
	for time.Now().Before(deadline) {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
			if err != nil {
				continue
			}
			s := string(b)
			i, j := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
			if i < 0 || j < i {
				continue
			}
			f := strings.Fields(s[j+1:])
			if len(f) > 2 && s[i+1:j] == name && f[2] == strconv.Itoa(pgid) && f[0] != "Z" {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no %s in group %d", name, pgid)
}
