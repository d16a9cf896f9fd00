package proc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// reapPoll is how often the reaper looks for children even without
// SIGCHLD; signals coalesce and are drained, so this is only a safety net.
const reapPoll = time.Second

// Status is how a process ended.
type Status struct{ ws syscall.WaitStatus }

// FromWaitStatus is the Status of wait status ws.
func FromWaitStatus(ws syscall.WaitStatus) Status { return Status{ws} }

// Code is the exit status as a shell reports it: the exit code, or 128+N
// after signal N.
func (s Status) Code() int {
	switch {
	case s.ws.Exited():
		return s.ws.ExitStatus()
	case s.ws.Signaled():
		return 128 + int(s.ws.Signal())
	}
	return -1
}

func (s Status) String() string {
	if s.ws.Signaled() {
		return "killed by " + s.ws.Signal().String()
	}
	return "exit " + strconv.Itoa(s.Code())
}

// Reaper reaps every child and hands each started process's status to its
// waiter.
type Reaper struct {
	mu      sync.Mutex
	waiters map[int]chan Status
}

// NewReaper returns a Reaper; call Run for it to reap.
func NewReaper() *Reaper { return &Reaper{waiters: map[int]chan Status{}} }

// Run reaps children until ctx ends.
func (r *Reaper) Run(ctx context.Context) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGCHLD)
	defer signal.Stop(sigs)
	tick := time.NewTicker(reapPoll)
	defer tick.Stop()
	for {
		r.reap()
		select {
		case <-sigs:
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}

func (r *Reaper) reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
		r.mu.Lock()
		ch := r.waiters[pid]
		delete(r.waiters, pid)
		r.mu.Unlock()
		if ch != nil {
			ch <- Status{ws}
		}
	}
}

// Start runs path with argv and attr, and returns its pid and a channel
// that gets its status once it ends.
func (r *Reaper) Start(path string, argv []string, attr *syscall.ProcAttr) (int, <-chan Status, error) {
	// Held across fork and registration: the reaper cannot hand out the
	// status of a pid it does not know yet.
	r.mu.Lock()
	defer r.mu.Unlock()
	pid, err := syscall.ForkExec(path, argv, attr)
	if err != nil {
		return 0, nil, fmt.Errorf("start %s: %w", path, err)
	}
	ch := make(chan Status, 1)
	r.waiters[pid] = ch
	return pid, ch, nil
}

// SetSubreaper makes orphaned descendants this process's children, as they
// are PID 1's, so that the Reaper reaps them outside a container too.
func SetSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set child subreaper: %w", err)
	}
	return nil
}

// Signal sends sig to process group pgid. It reports false when the group
// has no live process: none at all, or only zombies, as GroupEmpty counts
// them (the kernel signals a group of zombies without an error).
func Signal(pgid int, sig syscall.Signal) (bool, error) {
	if GroupEmpty(pgid, 0) {
		return false, nil
	}
	err := syscall.Kill(-pgid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("signal group %d: %w", pgid, err)
	}
	return true, nil
}

// SignalSession sends sig to every live process of session sid, in every
// process group of it, as a terminal's hangup reaches them through their
// shell. It reports whether it found one.
func SignalSession(sid int, sig syscall.Signal) (bool, error) {
	found := false
	var errs []error
	for _, pid := range pids() {
		st, ok := readStat(pid)
		if !ok || st.session != sid || st.state == 'Z' || st.state == 'X' {
			continue
		}
		found = true
		if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("signal %d of session %d: %w", pid, sid, err))
		}
	}
	return found, errors.Join(errs...)
}

// GroupEmpty reports whether process group pgid has no live process other
// than except (0 for none). Zombies do not count: they are gone but for
// their parent's wait.
func GroupEmpty(pgid, except int) bool {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	all := pids()
	if all == nil {
		return false
	}
	for _, pid := range all {
		if pid == except {
			continue
		}
		state, pgrp, ok := stat(pid)
		if ok && pgrp == pgid && state != 'Z' && state != 'X' {
			return false
		}
	}
	return true
}

// ChildOf returns a child of ppid, a zombie one included, and false if it
// has none.
func ChildOf(ppid int) (int, bool) {
	for _, pid := range pids() {
		if st, ok := readStat(pid); ok && st.ppid == ppid {
			return pid, true
		}
	}
	return 0, false
}

// pids lists the processes in /proc.
func pids() []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	out := make([]int, 0, len(names))
	for _, name := range names {
		if pid, err := strconv.Atoi(name); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// stat reads the state and process group of pid from /proc/PID/stat.
func stat(pid int) (state byte, pgrp int, ok bool) {
	st, ok := readStat(pid)
	return st.state, st.pgrp, ok
}

// Owner returns the user and session of live process pid; false for a
// zombie or a process that is gone.
func Owner(pid int) (uid, sid int, ok bool) {
	st, ok := readStat(pid)
	if !ok || st.state == 'Z' || st.state == 'X' {
		return 0, 0, false
	}
	fi, err := os.Stat("/proc/" + strconv.Itoa(pid))
	if err != nil {
		return 0, 0, false
	}
	sys, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return int(sys.Uid), st.session, true
}

// procStat is what the agent reads of /proc/PID/stat.
type procStat struct {
	state               byte
	ppid, pgrp, session int
}

func readStat(pid int) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	// "pid (comm) state ppid pgrp ...": comm may hold anything, even ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 4 || len(f[0]) != 1 {
		return procStat{}, false
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	pgrp, err2 := strconv.Atoi(string(f[2]))
	session, err3 := strconv.Atoi(string(f[3]))
	return procStat{state: f[0][0], ppid: ppid, pgrp: pgrp, session: session}, err1 == nil && err2 == nil && err3 == nil
}
