package agent

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"shelljob.dev/shelljob/agent/proc"
	"shelljob.dev/shelljob/agent/spool"
	"shelljob.dev/shelljob/internal/agentapi"
)

// Files of a job's directory.
const (
	jobFile     = "job.json"
	exitFile    = "exit.json"
	commandFile = "command"
	filesDir    = "files"
	outputDir   = "output"
	fifoFile    = "fifo"
	homeDir     = "home"
)

const (
	// readBufBytes is the producer's read size: a quarter of the pipe, so
	// that a fast writer finds room while the producer stores.
	readBufBytes = 256 << 10
	// pipeBytes is the pipe capacity asked for (Linux's default cap for
	// unprivileged processes): a burst of output never waits for the
	// producer.
	pipeBytes = 1 << 20
)

// jobRecord is job.json: how the job started.
type jobRecord struct {
	Job       string    `json:"job"`
	Stateful  bool      `json:"stateful,omitempty"`
	Shell     string    `json:"shell"`
	PGID      int       `json:"pgid"`
	StartedAt time.Time `json:"startedAt"`
	// UID is the user the command runs as, when jobs are isolated.
	UID int `json:"uid,omitempty"`
	// Console: the command runs on a terminal of its own (console.go).
	Console bool `json:"console,omitempty"`
}

// exitRecord is exit.json: how the job ended.
type exitRecord struct {
	ExitCode     *int      `json:"exitCode,omitempty"`
	Lost         bool      `json:"lost,omitempty"`
	EndedAt      time.Time `json:"endedAt"`
	OutputBytes  int64     `json:"outputBytes"`
	DroppedBytes int64     `json:"droppedBytes"`
	LastOutput   time.Time `json:"lastOutput,omitzero"`
	OOMKills     int64     `json:"oomKills,omitempty"`
	Shutdown     bool      `json:"shutdown,omitempty"`
	// Files is nil in the records of agents that did not count them.
	Files *agentapi.Files `json:"files,omitempty"`
	// Signals were sent to the group when asked (Daemon.Signal).
	Signals []agentapi.SentSignal `json:"signals,omitempty"`
}

type job struct {
	id    string
	dir   string
	rec   jobRecord
	spool *spool.Spool
	// done is closed when the job has ended.
	done chan struct{}

	// Guarded by Daemon.mu, as the event streams read them.
	ended bool
	exit  exitRecord

	// out is the read end of the command's output; outDone is closed once
	// the producer has stopped reading it.
	out     *os.File
	outDone chan struct{}
	// probe reports whether the job's group has no process of the job
	// left, and whether its id may now name another group.
	probe func() (empty, gone bool)
	// endSandbox, for a Fork job in namespaces of its own, kills what is
	// left in them.
	endSandbox func()
	// console is a running Console job's terminal; nil for other jobs,
	// and for the Console jobs of an earlier run.
	console *console
	// oomKills counts the out-of-memory kills of the job's processes
	// (oomWatch); guarded by Daemon.mu.
	oomKills int64
	// delivered: the job's reader has its output and files (budget.go);
	// disk is what its directory takes once it ended. Guarded by
	// Daemon.mu.
	delivered bool
	disk      int64

	mu sync.Mutex
	// exited: the command has ended (its shell reported its status), with
	// code; the output may still be open.
	exited bool
	code   int
	// groupGone: the group was found empty after the command ended, so its
	// id is free and is never signalled again.
	groupGone bool
	// shutdown: the agent stopped the job on its way out, as its pod ends.
	shutdown bool
	// signals were sent when asked (Daemon.Signal), for its exit record.
	signals []agentapi.SentSignal
}

func newJob(id, dir string, rec jobRecord, sp *spool.Spool) *job {
	return &job{id: id, dir: dir, rec: rec, spool: sp, done: make(chan struct{}), outDone: make(chan struct{})}
}

// end records how the job ended; the caller holds Daemon.mu.
func (j *job) end(ex exitRecord) {
	j.ended, j.exit = true, ex
	close(j.done)
}

func (j *job) resp() agentapi.StartResponse {
	return agentapi.StartResponse{PGID: j.rec.PGID, StartedAt: j.rec.StartedAt}
}

func (j *job) setExited(code int) {
	j.mu.Lock()
	j.exited, j.code = true, code
	j.mu.Unlock()
}

// groupEmpty probes the group, and marks it gone when its id may be reused.
func (j *job) groupEmpty() bool {
	empty, gone := j.probe()
	if gone {
		j.mu.Lock()
		j.groupGone = true
		j.mu.Unlock()
	}
	return empty
}

func (j *job) startedEvent() agentapi.Event {
	return agentapi.Event{Type: agentapi.EventStarted, Job: j.id, Time: j.rec.StartedAt, PGID: j.rec.PGID}
}

// exitedEvent: the caller holds Daemon.mu.
func (j *job) exitedEvent() agentapi.Event {
	e := agentapi.Event{
		Type: agentapi.EventExited, Job: j.id, Time: j.exit.EndedAt, PGID: j.rec.PGID,
		ExitCode: j.exit.ExitCode, Lost: j.exit.Lost, OOMKills: j.exit.OOMKills, Shutdown: j.exit.Shutdown,
		OutputBytes: j.exit.OutputBytes, DroppedBytes: j.exit.DroppedBytes, Files: j.exit.Files,
		Signals: j.exit.Signals,
	}
	if !j.exit.LastOutput.IsZero() {
		t := j.exit.LastOutput
		e.LastOutput = &t
	}
	return e
}

func (j *job) statusEvent(now time.Time) agentapi.Event {
	st := j.spool.Stats()
	e := agentapi.Event{
		Type: agentapi.EventStatus, Job: j.id, Time: now, PGID: j.rec.PGID,
		OutputBytes: st.Written, DroppedBytes: st.Dropped,
	}
	if !st.LastWrite.IsZero() {
		e.LastOutput = &st.LastWrite
	}
	return e
}

// commandFD is the descriptor on which a Fork job's shell reads its
// command: never in argv, which every process may read in /proc.
const commandFD = 3

// shellArgv runs the command the shell finds on commandFD, and closes the
// descriptor before the command runs. zsh reads it itself; another shell
// through cat.
func shellArgv(shell string) []string {
	read := fmt.Sprintf(`"$(cat <&%d)"`, commandFD)
	if filepath.Base(shell) == "zsh" {
		read = fmt.Sprintf(`"$(<&%d)"`, commandFD)
	}
	return []string{filepath.Base(shell), "-c", fmt.Sprintf("eval %s %d<&-", read, commandFD)}
}

// startFork runs the command in SHELL in a new session, the command on
// commandFD. The returned waiter returns once the job has ended.
func (d *Daemon) startFork(req agentapi.StartRequest) (*job, func(), error) {
	if w := d.takeWarm(); w != nil {
		return d.startForkWarm(req, w)
	}
	path, dir, sp, err := d.prepareFork(req)
	if err != nil {
		return nil, nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		sp.Close()
		return nil, nil, err
	}
	setPipeSize(w)
	s, uid, err := d.spawnWithFiles(req, dir, path, w)
	w.Close()
	if err != nil {
		r.Close()
		sp.Close()
		d.reclaim(&job{id: req.Job, dir: dir})
		return nil, nil, err
	}
	return d.forkStarted(req, dir, sp, r, s, uid)
}

// prepareFork finds the shell of a job that runs in a shell of its own
// (Fork, Direct, Console), and makes its directory and spool.
func (d *Daemon) prepareFork(req agentapi.StartRequest) (path, dir string, sp *spool.Spool, err error) {
	if path, err = exec.LookPath(req.Shell); err != nil {
		return "", "", nil, err
	}
	dir, sp, err = d.prepare(req)
	return path, dir, sp, err
}

// spawnWithFiles starts a Fork job's shell with no input, its output to
// out and its command on commandFD.
func (d *Daemon) spawnWithFiles(req agentapi.StartRequest, dir, path string, out *os.File) (started, int, error) {
	null, err := os.Open(os.DevNull)
	if err != nil {
		return started{}, 0, err
	}
	defer null.Close()
	command, err := os.Open(filepath.Join(dir, commandFile))
	if err != nil {
		return started{}, 0, err
	}
	defer command.Close()
	return d.spawnFork(req, dir, path, []uintptr{null.Fd(), out.Fd(), out.Fd(), command.Fd()}, nil)
}

// spawnFork starts a Fork job's shell with files, as a user of its own
// when jobs are isolated. With tty, the slave of a pseudo-terminal that is
// its descriptor 0, the shell's session gets it for its controlling
// terminal, and the job's user owns it.
func (d *Daemon) spawnFork(req agentapi.StartRequest, dir, path string, files []uintptr, tty *os.File) (started, int, error) {
	attr := &syscall.ProcAttr{Dir: d.opts.Home, Files: files, Sys: &syscall.SysProcAttr{Setsid: true, Setctty: tty != nil}}
	var c *cred
	if d.users != nil {
		u, home, err := d.isolateFork(dir)
		if err != nil {
			return started{}, 0, err
		}
		c, attr.Dir = &u, home
		if tty != nil {
			if err := handTerminal(tty, u); err != nil {
				return started{}, 0, err
			}
		}
	}
	attr.Env = d.env(attr.Dir, dir, req.Job)
	s, err := d.spawn(path, shellArgv(req.Shell), attr, c)
	if err != nil {
		return started{}, 0, err
	}
	if c == nil {
		return s, 0, nil
	}
	return s, c.uid, nil
}

// forkStarted records a Fork job whose shell runs.
func (d *Daemon) forkStarted(req agentapi.StartRequest, dir string, sp *spool.Spool, out *os.File, s started, uid int) (*job, func(), error) {
	rec := jobRecord{Job: req.Job, Shell: req.Shell, PGID: s.pid, UID: uid, StartedAt: time.Now(), Console: req.Console}
	if err := writeJSON(filepath.Join(dir, jobFile), rec); err != nil {
		// The command runs: it is reported, but a restarted agent will not
		// know it.
		d.log.Error(err, "Could not record a start", "job", req.Job)
	}
	j := newJob(req.Job, dir, rec, sp)
	j.out = out
	j.endSandbox = s.end
	pid := s.pid
	j.probe = func() (bool, bool) {
		e := proc.GroupEmpty(pid, 0)
		return e, e
	}
	go d.produce(j)
	return j, func() {
		st := <-s.exited
		j.setExited(st.Code())
		d.awaitOutput(j)
	}, nil
}

// isolateFork gives a Fork job in dir a user of its own, its files and a
// home, and returns the user and the home.
func (d *Daemon) isolateFork(dir string) (cred, string, error) {
	c, err := d.users.fork()
	if err != nil {
		return cred{}, "", err
	}
	home, err := d.forkHome(dir, c)
	return c, home, err
}

// forkHome gives the Fork job in dir, of user c, its files and a home,
// and returns the home.
func (d *Daemon) forkHome(dir string, c cred) (string, error) {
	home := filepath.Join(dir, homeDir)
	// One left by a start that failed, or by an agent that crashed, goes.
	if err := reclaim(home, d.users.agent); err != nil {
		return "", err
	}
	if err := os.RemoveAll(home); err != nil {
		return "", err
	}
	if err := os.Mkdir(home, 0o700); err != nil {
		return "", err
	}
	if err := hand(home, c); err != nil {
		return "", err
	}
	if err := hand(filepath.Join(dir, filesDir), c); err != nil {
		return "", err
	}
	return home, nil
}

func setPipeSize(f *os.File) {
	// Best effort: a smaller pipe only means more wakeups.
	_, _ = unix.FcntlInt(f.Fd(), unix.F_SETPIPE_SZ, pipeBytes)
}

// produce moves the command's output into the spool as fast as it comes.
func (d *Daemon) produce(j *job) {
	defer close(j.outDone)
	defer j.out.Close()
	buf := make([]byte, readBufBytes)
	logged := false
	for {
		n, err := j.out.Read(buf)
		if n > 0 {
			if _, werr := j.spool.Write(buf[:n]); werr != nil && !logged {
				d.log.Error(werr, "Could not spool the output; the rest is counted, not kept", "job", j.id)
				logged = true
			}
		}
		if err != nil {
			return
		}
	}
}

// awaitOutput returns once the command's output is closed, or OrphanGrace
// after its group was found empty while a process outside the group still
// holds it open; then the output is closed on that process.
func (d *Daemon) awaitOutput(j *job) {
	tick := time.NewTicker(groupPoll)
	defer tick.Stop()
	var grace <-chan time.Time
	for {
		select {
		case <-j.outDone:
			return
		case <-tick.C:
			if grace == nil && j.groupEmpty() {
				grace = time.After(d.opts.OrphanGrace)
			}
		case <-grace:
			d.log.V(1).Info("Output held open outside the job's group; closing it", "job", j.id)
			j.out.Close()
			<-j.outDone
			return
		}
	}
}

// Signal sends sig to the job's process group.
func (d *Daemon) Signal(id string, sig agentapi.Signal) (agentapi.SignalResponse, error) {
	if _, err := sysSignal(sig); err != nil {
		return agentapi.SignalResponse{}, err
	}
	j, err := d.lookup(id)
	if err != nil {
		return agentapi.SignalResponse{}, err
	}
	return d.signal(j, sig, true)
}

// signal sends sig to j's group; asked records it for the job's exit, as a
// stop its client asked for (the agent's own stop on its way out is not).
func (d *Daemon) signal(j *job, sig agentapi.Signal, asked bool) (agentapi.SignalResponse, error) {
	s, err := sysSignal(sig)
	if err != nil {
		return agentapi.SignalResponse{}, err
	}
	d.mu.Lock()
	ended := j.ended
	d.mu.Unlock()
	if ended {
		return agentapi.SignalResponse{GroupEmpty: true}, nil
	}
	j.spool.Stop()
	j.mu.Lock()
	if j.groupGone {
		j.mu.Unlock()
		return agentapi.SignalResponse{GroupEmpty: true}, nil
	}
	alive, err := proc.Signal(j.rec.PGID, s)
	if err == nil && alive && asked {
		// Under j.mu, as finish reads them: the exit that this signal
		// causes cannot be recorded without it.
		j.signals = append(j.signals, agentapi.SentSignal{Signal: sig, Time: time.Now()})
	}
	j.mu.Unlock()
	if err != nil {
		return agentapi.SignalResponse{}, fmt.Errorf("signal %s: %w", j.id, err)
	}
	d.log.V(1).Info("Job signalled", "job", j.id, "signal", sig, "pgid", j.rec.PGID)
	if !alive {
		return agentapi.SignalResponse{GroupEmpty: j.groupEmpty()}, nil
	}
	deadline := time.Now().Add(signalSettle)
	for {
		if j.groupEmpty() {
			return agentapi.SignalResponse{GroupEmpty: true}, nil
		}
		if time.Now().After(deadline) {
			return agentapi.SignalResponse{}, nil
		}
		time.Sleep(signalSettle / 10)
	}
}

func sysSignal(sig agentapi.Signal) (syscall.Signal, error) {
	switch sig {
	case agentapi.SIGINT:
		return syscall.SIGINT, nil
	case agentapi.SIGTERM:
		return syscall.SIGTERM, nil
	case agentapi.SIGKILL:
		return syscall.SIGKILL, nil
	}
	return 0, fmt.Errorf("unknown signal %q", sig)
}
