package proc

import (
	"context"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"shelljob.dev/shelljob/agent/pty"
)

// waitTimeout bounds every wait here; the tests assert behaviour, not speed.
const waitTimeout = 10 * time.Second

func startSh(t *testing.T, r *Reaper, script string) (int, <-chan Status) {
	t.Helper()
	attr := &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: []uintptr{0, 1, 2},
		Sys:   &syscall.SysProcAttr{Setsid: true},
	}
	pid, ch, err := r.Start("/bin/sh", []string{"sh", "-c", script}, attr)
	if err != nil {
		t.Fatal(err)
	}
	return pid, ch
}

func await(t *testing.T, ch <-chan Status) Status {
	t.Helper()
	select {
	case st := <-ch:
		return st
	case <-time.After(waitTimeout):
		t.Fatal("process did not end")
	}
	return Status{}
}

func runReaper(t *testing.T) *Reaper {
	t.Helper()
	if err := SetSubreaper(); err != nil {
		t.Fatal(err)
	}
	r := NewReaper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go r.Run(ctx)
	return r
}

func TestExitCodes(t *testing.T) {
	r := runReaper(t)
	tests := map[string]int{
		"exit 0":        0,
		"exit 3":        3,
		"kill -INT $$":  130,
		"kill -TERM $$": 143,
		"kill -KILL $$": 137,
	}
	for script, want := range tests {
		_, ch := startSh(t, r, script)
		if got := await(t, ch).Code(); got != want {
			t.Errorf("%s: code %d, want %d", script, got, want)
		}
	}
}

func TestGroupEmpty(t *testing.T) {
	r := runReaper(t)
	pid, ch := startSh(t, r, "sleep 100 & exec sleep 100")
	t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGKILL) })
	if GroupEmpty(pid, 0) {
		t.Fatal("group of a running process reported empty")
	}
	// Without its leader, the group holds the background sleep once the
	// shell has forked it.
	deadline := time.Now().Add(waitTimeout)
	for GroupEmpty(pid, pid) {
		if time.Now().After(deadline) {
			t.Fatal("group with a background child reported empty without its leader")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if ok, err := Signal(pid, syscall.SIGTERM); !ok || err != nil {
		t.Fatalf("signal: %v %v", ok, err)
	}
	if got := await(t, ch).Code(); got != 143 {
		t.Errorf("code %d, want 143", got)
	}
	deadline = time.Now().Add(waitTimeout)
	for !GroupEmpty(pid, 0) {
		if time.Now().After(deadline) {
			t.Fatal("group never empty")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if ok, err := Signal(pid, syscall.SIGTERM); ok || err != nil {
		t.Errorf("signal to an empty group: %v %v", ok, err)
	}
}

// A session's processes all get the signal, those of process groups of
// their own too.
func TestSignalSession(t *testing.T) {
	r := runReaper(t)
	// On a terminal of its own, the shell has job control: the background
	// sleep gets a group of its own.
	master, slave, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	defer master.Close()
	go func() { _, _ = io.Copy(io.Discard, master) }()
	attr := &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: []uintptr{slave.Fd(), slave.Fd(), slave.Fd()},
		Sys:   &syscall.SysProcAttr{Setsid: true, Setctty: true},
	}
	pid, ch, err := r.Start("/bin/sh", []string{"sh", "-c", "set -m; sleep 100 & wait"}, attr)
	slave.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = SignalSession(pid, syscall.SIGKILL) })
	deadline := time.Now().Add(waitTimeout)
	var sleeper int
	for sleeper == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no sleep in a group of its own")
		}
		time.Sleep(10 * time.Millisecond)
		for _, p := range pids() {
			if st, ok := readStat(p); ok && st.session == pid && st.pgrp != pid && st.state != 'Z' {
				sleeper = p
			}
		}
	}
	if found, err := SignalSession(pid, syscall.SIGTERM); !found || err != nil {
		t.Fatalf("signal the session: %v %v", found, err)
	}
	await(t, ch)
	for deadline = time.Now().Add(waitTimeout); ; time.Sleep(10 * time.Millisecond) {
		if st, ok := readStat(sleeper); !ok || st.state == 'Z' || st.session != pid {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the sleep in a group of its own lives on")
		}
	}
	if found, err := SignalSession(pid, syscall.SIGTERM); found || err != nil {
		t.Errorf("signal to an empty session: %v %v", found, err)
	}
}

func TestReapsOrphans(t *testing.T) {
	r := runReaper(t)
	_, ch := startSh(t, r, "sleep 0.2 & exit 0")
	await(t, ch)
	// The orphaned sleep becomes our child; once it ends it must not stay
	// a zombie.
	deadline := time.Now().Add(waitTimeout)
	for {
		if zombies := childZombies(t); zombies == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("orphan left as a zombie")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func childZombies(t *testing.T) int {
	t.Helper()
	names, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	me := strconv.Itoa(os.Getpid())
	for _, e := range names {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 && f[0] == "Z" && f[1] == me {
			n++
		}
	}
	return n
}

func TestStatParsesOddNames(t *testing.T) {
	state, pgrp, ok := stat(os.Getpid())
	if !ok || state != 'R' && state != 'S' || pgrp != syscall.Getpgrp() {
		t.Errorf("stat(self) = %c %d %v", state, pgrp, ok)
	}
}
