package agent

// Where the worker allows it, each job's processes run in namespaces of
// their own, so that jobs side by side see nothing of each other's
// processes, and a job's processes all end with it:
//
//   - a user namespace that maps the job's user alone (and in which it is
//     no one's root), owning
//   - a PID namespace, whose init is the agent's binary (RunInit), which
//     starts the job's shell and ends when the shell ends: the kernel then
//     kills every process left in the namespace, setsid daemons included;
//   - a mount namespace with a /proc of that PID namespace alone: the job
//     sees its own processes and no other;
//   - an IPC namespace: no SysV or POSIX IPC object of another job.
//
// The persistent shell of Stateful jobs gets namespaces of its own too,
// which its jobs share, as they share the shell.
//
// The agent makes them with clone(2), writes the user namespace's maps
// (it has CAP_SETUID and CAP_SETGID in the pod's user namespace), and
// starts the init as the job's user with CAP_SYS_ADMIN in the new user
// namespace alone, which the init drops once it has mounted /proc. That
// needs a seccomp profile that lets clone make namespaces and lets mount
// through (containerd's RuntimeDefault refuses both to a container
// without CAP_SYS_ADMIN), and a container /proc with no masked paths (the
// kernel refuses a fresh procfs mount where part of the existing one is
// hidden), which only a pod in a user namespace may ask for (hostUsers:
// false, procMount: Unmasked). The agent tries it once at its start
// (probeSandbox); where it fails, jobs run in the pod's namespaces, and
// the agent logs and reports why (agentapi.Worker).

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"shelljob.dev/shelljob/agent/proc"
	"shelljob.dev/shelljob/internal/agentapi"
)

const (
	// InitCommand is the agent's subcommand that is a job's PID 1 (RunInit).
	InitCommand = "job-init"
	// selfExe is the agent's own binary, whatever the path it was started
	// from: the job's user may not reach that path, but the kernel opens
	// the binary through this link without walking it.
	selfExe = "/proc/self/exe"
	// initTimeout bounds the start of a job's init, up to its report.
	initTimeout = 10 * time.Second
	// sandboxFlags are the namespaces of a job.
	sandboxFlags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID | syscall.CLONE_NEWNS | syscall.CLONE_NEWIPC
)

// initSpec is what the agent sends a job's init on its spec descriptor.
type initSpec struct {
	// Path, Argv, Env and Dir start the job's shell, in a session of its
	// own, with the init's descriptors below the spec's.
	Path string   `json:"path,omitempty"`
	Argv []string `json:"argv,omitempty"`
	Env  []string `json:"env,omitempty"`
	Dir  string   `json:"dir,omitempty"`
	// Ctty makes the terminal on descriptor 0 the controlling terminal of
	// the shell's session: a Console job's.
	Ctty bool `json:"ctty,omitempty"`
	// Probe makes the init check its namespaces and end, starting nothing.
	Probe bool `json:"probe,omitempty"`
}

// started is how a job's processes started: the process whose group its
// signals go to, its status once it ends, and, in a sandbox, end, which
// kills what is left in the job's namespaces and returns once they are
// gone.
type started struct {
	pid    int
	exited <-chan proc.Status
	end    func()
}

// spawn starts path with argv and attr as user c (nil: as the agent), in a
// sandbox when the daemon has one.
func (d *Daemon) spawn(path string, argv []string, attr *syscall.ProcAttr, c *cred) (started, error) {
	if !d.sandboxed || c == nil {
		if c != nil {
			attr.Sys.Credential = c.sys()
		}
		pid, exited, err := d.reaper.Start(path, argv, attr)
		return started{pid: pid, exited: exited}, err
	}
	return d.startInit(initSpec{Path: path, Argv: argv, Env: attr.Env, Dir: attr.Dir, Ctty: attr.Sys.Setctty}, attr.Files, *c)
}

// startInit starts an init in namespaces of c's, with files below its spec
// and report descriptors, and waits for its report. The pid it returns is
// the shell's (as the agent sees it), or the init's for a probe, and its
// status the shell's, or the init's if the init ended before the shell.
func (d *Daemon) startInit(spec initSpec, files []uintptr, c cred) (started, error) {
	p, err := d.launchInit(files, c)
	if err != nil {
		return started{}, err
	}
	return p.run(spec)
}

// pendingInit is an init started in its namespaces that waits for its
// spec.
type pendingInit struct {
	pid   int
	specW *os.File
	// report gives the init's report; exited, after it, the shell's
	// status, or the init's if the init ended before the shell.
	report <-chan string
	exited <-chan proc.Status
	// done is closed once the init has ended.
	done <-chan struct{}
}

// launchInit starts an init in namespaces of c's, with files below its
// spec and report descriptors; it waits for nothing of the init.
func (d *Daemon) launchInit(files []uintptr, c cred) (*pendingInit, error) {
	specR, specW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	repR, repW, err := os.Pipe()
	if err != nil {
		specR.Close()
		specW.Close()
		return nil, err
	}
	specFD := len(files)
	attr := &syscall.ProcAttr{
		Dir:   "/",
		Env:   os.Environ(),
		Files: append(append([]uintptr(nil), files...), specR.Fd(), repW.Fd()),
		Sys: &syscall.SysProcAttr{
			Setsid:                     true,
			Cloneflags:                 sandboxFlags,
			UidMappings:                []syscall.SysProcIDMap{{ContainerID: c.uid, HostID: c.uid, Size: 1}},
			GidMappings:                []syscall.SysProcIDMap{{ContainerID: c.gid, HostID: c.gid, Size: 1}},
			GidMappingsEnableSetgroups: true,
			Credential:                 c.sys(),
			// In the new user namespace only, for the init's mounts.
			AmbientCaps: []uintptr{unix.CAP_SYS_ADMIN},
		},
	}
	initPID, initExited, err := d.reaper.Start(selfExe, []string{"shelljob-agent", InitCommand, "--spec-fd=" + strconv.Itoa(specFD)}, attr)
	specR.Close()
	repW.Close()
	if err != nil {
		specW.Close()
		repR.Close()
		return nil, fmt.Errorf("make the job's namespaces: %w", err)
	}
	var initStatus proc.Status
	initDone := make(chan struct{})
	go func() {
		initStatus = <-initExited
		close(initDone)
	}()
	report := make(chan string, 1)
	exited := make(chan proc.Status, 1)
	go func() {
		defer repR.Close()
		br := bufio.NewReader(repR)
		line, _ := br.ReadString('\n')
		report <- strings.TrimSpace(line)
		// Then the shell's wait status, once it ended.
		line, _ = br.ReadString('\n')
		if ws, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(line), "status "), 10, 32); err == nil {
			exited <- proc.FromWaitStatus(syscall.WaitStatus(ws))
			return
		}
		<-initDone
		exited <- initStatus
	}()
	return &pendingInit{pid: initPID, specW: specW, report: report, exited: exited, done: initDone}, nil
}

// end kills the init, and so every process of its namespaces, returns
// once it is gone, and closes its spec (run closes it too).
func (p *pendingInit) end() {
	_ = syscall.Kill(p.pid, syscall.SIGKILL)
	<-p.done
	p.specW.Close()
}

// alive tells whether the init still waits: nothing killed it.
func (p *pendingInit) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// run sends the init its spec and waits for its report; see startInit.
func (p *pendingInit) run(spec initSpec) (started, error) {
	defer p.specW.Close()
	fail := func(err error) (started, error) {
		p.end()
		return started{}, err
	}
	// The spec stays open until the shell is found: the init reaps
	// nothing before, so that a shell that ended at once is still there.
	if err := json.NewEncoder(p.specW).Encode(spec); err != nil {
		return fail(fmt.Errorf("send the job's init its spec: %w", err))
	}
	select {
	case line := <-p.report:
		if line != "ok" {
			if line == "" {
				line = "the job's init ended without a word"
			}
			return fail(errors.New(strings.TrimPrefix(line, "error: ")))
		}
	case <-time.After(initTimeout):
		return fail(fmt.Errorf("the job's init did not report in %v", initTimeout))
	}
	if spec.Probe {
		return started{pid: p.pid, exited: p.exited, end: p.end}, nil
	}
	shell, ok := proc.ChildOf(p.pid)
	if !ok {
		return fail(errors.New("the job's shell is not the init's child"))
	}
	return started{pid: shell, exited: p.exited, end: p.end}, nil
}

// probeSandbox tells why jobs cannot run in namespaces of their own here,
// or returns "" when they can: it starts a probe init as user c and waits
// for it.
func (d *Daemon) probeSandbox(c cred) string {
	null, err := os.Open(os.DevNull)
	if err != nil {
		return err.Error()
	}
	defer null.Close()
	s, err := d.startInit(initSpec{Probe: true}, []uintptr{null.Fd(), null.Fd(), null.Fd()}, c)
	if err != nil {
		return err.Error()
	}
	select {
	case st := <-s.exited:
		if st.Code() != 0 {
			return "the probe init ended with " + st.String()
		}
	case <-time.After(initTimeout):
		s.end()
		return "the probe init did not end"
	}
	return ""
}

// RunInit is a job's PID 1, started by the agent in the job's namespaces
// with its spec on descriptor specFD and its report on specFD+1: it mounts
// the namespace's own /proc, drops its capabilities, starts the shell,
// reports, reaps every process of the namespace, and reports the shell's
// wait status once the shell has ended. It returns once no process is
// left in the namespace; the agent kills it (and so all of them) once the
// job has ended.
func RunInit(specFD int) int {
	// Capabilities are a thread's: the shell is forked from this one.
	runtime.LockOSThread()
	report := os.NewFile(uintptr(specFD+1), "report")
	fail := func(err error) int {
		fmt.Fprintf(report, "error: %v\n", err)
		return 125
	}
	var spec initSpec
	specFile := os.NewFile(uintptr(specFD), "spec")
	defer specFile.Close()
	if err := json.NewDecoder(specFile).Decode(&spec); err != nil {
		return fail(fmt.Errorf("read the spec: %w", err))
	}
	if os.Getpid() != 1 {
		return fail(fmt.Errorf("the job's init is pid %d, not 1 of a PID namespace of its own", os.Getpid()))
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fail(fmt.Errorf("make the job's mounts private: %w", err))
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fail(fmt.Errorf("mount the job's own /proc: %w (a container's /proc with masked paths refuses it: the pod needs hostUsers: false and procMount: Unmasked)", err))
	}
	if err := dropCapabilities(); err != nil {
		return fail(err)
	}
	if spec.Probe {
		if err := checkAlone(); err != nil {
			return fail(err)
		}
		fmt.Fprintln(report, "ok")
		return 0
	}
	// Caught, not ignored: a caught signal is the default again in the
	// shell. The init ends with the shell, not with a signal of its own.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT,
		syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGPIPE, syscall.SIGALRM)
	files := make([]uintptr, specFD)
	for fd := range files {
		files[fd] = ^uintptr(0) // closed in the shell
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil {
			files[fd] = uintptr(fd)
		}
	}
	shell, err := syscall.ForkExec(spec.Path, spec.Argv, &syscall.ProcAttr{
		Dir: spec.Dir, Env: spec.Env, Files: files, Sys: &syscall.SysProcAttr{Setsid: true, Setctty: spec.Ctty},
	})
	if err != nil {
		return fail(fmt.Errorf("start %s: %w", spec.Path, err))
	}
	// The init keeps none of the job's descriptors: its output ends with
	// the shell's processes.
	null, _ := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	for fd := range files {
		if fd <= 2 && null != nil {
			_ = unix.Dup2(int(null.Fd()), fd)
		} else if files[fd] != ^uintptr(0) {
			_ = unix.Close(fd)
		}
	}
	fmt.Fprintln(report, "ok")
	// Until the agent has found the shell, which it tells by closing the
	// spec.
	_, _ = io.Copy(io.Discard, specFile)
	specFile.Close()
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		switch {
		case errors.Is(err, syscall.EINTR):
		case err != nil:
			// No process is left in the namespace: nothing more to wait for.
			return 0
		case pid == shell:
			// The job goes on while the shell's group holds its output; the
			// agent ends the namespace once it has ended.
			fmt.Fprintf(report, "status %d\n", uint32(ws))
		}
	}
}

// dropCapabilities leaves this thread none, ambient ones included, so that
// the shell it starts has none either.
func dropCapabilities() error {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("drop capabilities: %w", err)
	}
	return nil
}

// checkAlone checks that /proc shows this process alone, as pid 1.
func checkAlone() error {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	var pids []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, e.Name())
		}
	}
	if len(pids) != 1 || pids[0] != "1" {
		return fmt.Errorf("the job's /proc shows processes %v, not its init alone", pids)
	}
	return nil
}

// KillUser sends SIGKILL to every process the caller may signal but
// itself, that is to every process of its own user, until none is left:
// the agent runs it as a job's user once the job has ended. A process that
// forks while kill(2) walks the processes is killed in the same walk.
func KillUser() error {
	for range 1000 {
		err := syscall.Kill(-1, syscall.SIGKILL)
		if errors.Is(err, syscall.ESRCH) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("kill the user's processes: %w", err)
		}
		time.Sleep(time.Millisecond)
	}
	return errors.New("the user's processes did not all end")
}

// setUpSandbox decides, once, whether isolated jobs get namespaces of
// their own, and logs why not when they do not.
func (d *Daemon) setUpSandbox() {
	if d.opts.NoNamespaces {
		d.sandboxWhy = "the agent was told not to give jobs namespaces of their own"
	} else if c, err := d.users.fork(); err != nil {
		d.sandboxWhy = err.Error()
	} else if why := d.probeSandbox(c); why != "" {
		d.sandboxWhy = "jobs cannot have namespaces of their own here: " + why
	} else {
		d.sandboxed = true
		d.log.Info("Each job runs in user, PID, mount and IPC namespaces of its own")
		go d.warmUp()
		return
	}
	d.log.Info("Jobs run in the pod's PID namespace: each sees the processes and command lines of the others", "reason", d.sandboxWhy)
}

// isolation is how the daemon keeps jobs apart, and what a job can see of
// the others when that is less than namespaces of their own.
func (d *Daemon) isolation() (agentapi.Isolation, string) {
	switch {
	case d.sandboxed:
		return agentapi.IsolationNamespaces, ""
	case d.users != nil:
		return agentapi.IsolationUsers, d.sandboxWhy + "; a job sees every process of the worker, and its command line, in /proc"
	}
	return agentapi.IsolationNone, d.sandboxWhy
}
