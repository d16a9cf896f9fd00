package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"

	"shelljob.dev/shelljob/agent/proc"
	"shelljob.dev/shelljob/agent/spool"
	"shelljob.dev/shelljob/internal/agentapi"
)

// Timings of the daemon.
const (
	// DefaultOrphanGrace is how long a job's output may stay open once its
	// process group is empty: the reference closes it a grace after the
	// group is found empty, the grace that spaces its signal steps.
	DefaultOrphanGrace = agentapi.StopGrace
	// DefaultStatusInterval paces the status events of running jobs: about
	// every second, enough for idle timeouts counted in seconds.
	DefaultStatusInterval = time.Second
	// DefaultRetention is how long an ended job's spool stays: long enough
	// for the bot to deliver its final and files after a day offline.
	DefaultRetention = 24 * time.Hour

	// groupPoll is how often an exited command's group is checked while its
	// output is still open; the check is a scan of /proc.
	groupPoll = 100 * time.Millisecond
	// signalSettle is how long Signal watches the group empty after sending,
	// so that a command that dies of the signal at once is answered as gone.
	signalSettle = 250 * time.Millisecond
	// shutdownGrace is how long the daemon, asked to end, waits for the
	// jobs it sent SIGTERM before SIGKILL, and then for them to end: a
	// signal step each, within the worker pod's termination grace period
	// (5 s).
	shutdownGrace = agentapi.StopGrace
	// janitorInterval paces the removal of spools past their retention.
	janitorInterval = 10 * time.Minute
	// subscriberBuffer is how many events a slow events stream may lag
	// before it is cut; its caller reconnects and gets a fresh snapshot.
	subscriberBuffer = 4096
)

// Options configure a Daemon.
type Options struct {
	// SpoolDir holds the socket and the jobs. Defaults to agentapi.SpoolDir.
	SpoolDir string
	// Socket is the daemon's socket. Defaults to SpoolDir/agent.sock.
	Socket string
	// ReadyAddr is the TCP address of the readiness endpoint (GET
	// agentapi.ReadyPath), such as ":8079". Defaults to none.
	ReadyAddr string
	// Shell runs jobs that name none. Defaults to $SHELLJOB_SHELL, or
	// agentapi.DefaultShell.
	Shell string
	// Home is the working directory of every command, and its HOME unless
	// the environment names one. Defaults to $HOME, or / when that is unset
	// or missing. When jobs are isolated, it is the persistent shell's
	// alone (SPOOL/home instead when it is /), and each Fork job gets a
	// home of its own.
	Home string
	// Isolation says whether each job's command runs as a user of its own.
	// Defaults to IsolationAuto.
	Isolation Isolation
	// ForkUIDs are the users of Fork jobs. Defaults to DefaultForkUIDs.
	ForkUIDs UIDRange
	// NoNamespaces runs isolated jobs in the agent's own namespaces, even
	// where they could have namespaces of their own (sandbox.go).
	NoNamespaces bool
	// SharedDirs are the places every user may write, which a Fork job's
	// files are removed from when it ends. Defaults to the world-writable
	// directories of the worker's image for an agent that is PID 1, and
	// to /tmp, /var/tmp and /dev/shm otherwise.
	SharedDirs []string
	// SpoolSizeLimit is the size of the spool's volume, in bytes: past
	// SpoolBudget, delivered spools go (budget.go). Defaults to
	// $SHELLJOB_SPOOL_SIZE_LIMIT; 0 or unset: no budget, and spools go
	// Retention after their end only.
	SpoolSizeLimit int64
	// Env is the environment of every command, before the agent's own
	// variables. Defaults to the daemon's.
	Env []string
	// Limits cap each job's spool. Zero fields take the spool's defaults.
	Limits spool.Limits
	// OrphanGrace: see DefaultOrphanGrace.
	OrphanGrace time.Duration
	// StatusInterval: see DefaultStatusInterval.
	StatusInterval time.Duration
	// Retention: see DefaultRetention. Negative keeps spools forever.
	Retention time.Duration
	// FollowKeepalive is how often a follow gets a keepalive frame.
	// Defaults to agentapi.FollowKeepalive.
	FollowKeepalive time.Duration
	// EventsKeepalive is how often a quiet event stream gets an
	// EventKeepalive. Defaults to agentapi.EventsKeepalive.
	EventsKeepalive time.Duration
	// ConsoleAttachWait is how long a console waits for its attach before
	// it is hung up. Defaults to agentapi.ConsoleAttachWait.
	ConsoleAttachWait time.Duration
	// AttachStartWait is the longest an attach waits for its console to
	// start. Defaults to agentapi.AttachStartWait.
	AttachStartWait time.Duration
	// CgroupRoot is where the agent reads its memory cgroup's OOM kills.
	// Defaults to DefaultCgroupRoot.
	CgroupRoot string
	// Logger logs what no caller hears of. Defaults to a discarding logger.
	Logger logr.Logger
}

func (o Options) withDefaults() Options {
	if o.SpoolDir == "" {
		o.SpoolDir = agentapi.SpoolDir
	}
	if o.Socket == "" {
		o.Socket = SocketPath(o.SpoolDir)
	}
	if o.Shell == "" {
		o.Shell = cmp.Or(os.Getenv(agentapi.ShellEnv), agentapi.DefaultShell)
	}
	if o.Home == "" {
		o.Home = "/"
		if h := os.Getenv("HOME"); h != "" {
			if fi, err := os.Stat(h); err == nil && fi.IsDir() {
				o.Home = h
			}
		}
	}
	if o.Env == nil {
		o.Env = os.Environ()
	}
	if o.Isolation == "" {
		o.Isolation = IsolationAuto
	}
	if o.ForkUIDs.Count == 0 {
		o.ForkUIDs = DefaultForkUIDs
	}
	if o.SpoolSizeLimit == 0 {
		o.SpoolSizeLimit, _ = strconv.ParseInt(os.Getenv(agentapi.SpoolSizeLimitEnv), 10, 64)
	}
	if o.CgroupRoot == "" {
		o.CgroupRoot = DefaultCgroupRoot
	}
	if o.OrphanGrace <= 0 {
		o.OrphanGrace = DefaultOrphanGrace
	}
	if o.StatusInterval <= 0 {
		o.StatusInterval = DefaultStatusInterval
	}
	if o.Retention == 0 {
		o.Retention = DefaultRetention
	}
	if o.FollowKeepalive <= 0 {
		o.FollowKeepalive = agentapi.FollowKeepalive
	}
	if o.EventsKeepalive <= 0 {
		o.EventsKeepalive = agentapi.EventsKeepalive
	}
	if o.ConsoleAttachWait <= 0 {
		o.ConsoleAttachWait = agentapi.ConsoleAttachWait
	}
	if o.AttachStartWait <= 0 {
		o.AttachStartWait = agentapi.AttachStartWait
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logr.Discard()
	}
	return o
}

// SocketPath is where the daemon of spoolDir listens.
func SocketPath(spoolDir string) string { return filepath.Join(spoolDir, "agent.sock") }

// Daemon runs jobs. Create it with New, then Run it.
type Daemon struct {
	opts    Options
	log     logr.Logger
	reaper  *proc.Reaper
	jobsDir string
	zdotdir string
	// users is nil when commands run as the agent.
	users *users
	// sandboxed: isolated jobs run in namespaces of their own; else
	// sandboxWhy says why not.
	sandboxed  bool
	sandboxWhy string
	// shared are the places a Fork job's files are removed from.
	shared []string
	oom    *oomWatch
	room   *budget
	// shellHome is the persistent shell's home and first cwd.
	shellHome string

	mu       sync.Mutex
	jobs     map[string]*job
	starting map[string]chan struct{}
	// putting holds the puts of files under way, by job: a start waits
	// for its job's.
	putting map[string]chan struct{}
	// started is closed, and replaced, whenever a job starts: await's
	// wake-up.
	started chan struct{}
	subs    map[*subscriber]struct{}
	conns   map[net.Conn]struct{}
	closing bool

	// warm is the next Fork job's init, made ahead (warm.go); warming
	// while it is being made.
	warm    *warmInit
	warming bool

	// shellMu serializes Stateful starts; shell is the persistent shell.
	shellMu sync.Mutex
	shell   *pshell
}

// New returns a Daemon with opts.
func New(opts Options) *Daemon {
	opts = opts.withDefaults()
	return &Daemon{
		opts:      opts,
		log:       opts.Logger,
		oom:       newOOMWatch(opts.CgroupRoot),
		room:      newBudget(opts.SpoolSizeLimit, opts.Limits),
		reaper:    proc.NewReaper(),
		jobsDir:   filepath.Join(opts.SpoolDir, "jobs"),
		zdotdir:   filepath.Join(opts.SpoolDir, "zdotdir"),
		shellHome: opts.Home,
		jobs:      map[string]*job{},
		starting:  map[string]chan struct{}{},
		putting:   map[string]chan struct{}{},
		started:   make(chan struct{}),
		subs:      map[*subscriber]struct{}{},
		conns:     map[net.Conn]struct{}{},
	}
}

// Run serves until ctx ends, then stops the running jobs (SIGTERM, and
// SIGKILL after a grace) so that their exit statuses are recorded.
func (d *Daemon) Run(ctx context.Context) error {
	u, why, err := decideIsolation(d.opts.Isolation, d.opts.ForkUIDs)
	if err != nil {
		return fmt.Errorf("run agent: %w", err)
	}
	d.users = u
	// Before anything is started: the sandbox's probe is.
	reapCtx, stopReaping := context.WithCancel(context.Background())
	defer stopReaping()
	go d.reaper.Run(reapCtx)
	if u == nil {
		d.sandboxWhy = "commands run as the agent's own user (" + why + "): a job may read, signal and write into every other"
		d.log.Info("Commands run as the agent's own user: jobs are not isolated from each other", "reason", why)
	} else {
		// Before anything is made: the socket, the spools, and what commands
		// leave in shared places are their owner's alone.
		syscall.Umask(0o077)
	}
	for _, dir := range []string{d.jobsDir, d.zdotdir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("run agent: %w", err)
		}
	}
	if u != nil {
		if err := d.layOut(); err != nil {
			return fmt.Errorf("run agent: %w", err)
		}
		d.log.Info("Each job runs as a user of its own", "statefulUID", StatefulUID, "forkUIDs", u.forks.String(),
			"shellHome", d.shellHome)
		d.shared = sharedPlaces(d.opts.SharedDirs, d.opts.SpoolDir)
		d.log.Info("A Fork job's files go from the shared places when it ends", "places", d.shared)
		d.setUpSandbox()
	}
	if err := d.load(); err != nil {
		return fmt.Errorf("run agent: %w", err)
	}
	d.makeRoom()
	if err := os.Remove(d.opts.Socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("run agent: %w", err)
	}
	l, err := net.Listen("unix", d.opts.Socket)
	if err != nil {
		return fmt.Errorf("run agent: %w", err)
	}
	stopReady := func() {}
	if d.opts.ReadyAddr != "" {
		rl, err := net.Listen("tcp", d.opts.ReadyAddr)
		if err != nil {
			l.Close()
			return fmt.Errorf("run agent: %w", err)
		}
		stopReady = d.serveReady(rl)
	}
	go d.janitor(ctx)
	go d.oom.run(ctx, d)
	go d.keepRoom(ctx)

	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			if !d.track(conn) {
				conn.Close()
				continue
			}
			go d.serve(conn)
		}
	}()
	d.log.Info("Agent ready", "socket", d.opts.Socket, "spool", d.opts.SpoolDir, "readyAddr", d.opts.ReadyAddr)
	<-ctx.Done()

	d.mu.Lock()
	d.closing = true
	d.mu.Unlock()
	d.dropWarm()
	stopReady()
	l.Close()
	<-accepted
	d.stopAll()
	d.mu.Lock()
	for c := range d.conns {
		c.Close()
	}
	d.mu.Unlock()
	return nil
}

// layOut sets the owners and modes of an isolating agent's directories
// (see isolate.go).
func (d *Daemon) layOut() error {
	own := d.users.agent
	if err := os.Lchown(d.opts.SpoolDir, own.uid, own.gid); err != nil {
		return err
	}
	for dir, mode := range map[string]os.FileMode{d.opts.SpoolDir: 0o711, d.jobsDir: 0o711, d.zdotdir: 0o755} {
		if err := os.Chmod(dir, mode); err != nil {
			return err
		}
	}
	if d.opts.Home == "/" {
		d.shellHome = filepath.Join(d.opts.SpoolDir, "home")
		if err := os.MkdirAll(d.shellHome, 0o700); err != nil {
			return err
		}
	}
	return ownDir(d.shellHome, own, d.users.stateful())
}

func (d *Daemon) track(c net.Conn) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closing {
		return false
	}
	d.conns[c] = struct{}{}
	return true
}

func (d *Daemon) untrack(c net.Conn) {
	d.mu.Lock()
	delete(d.conns, c)
	d.mu.Unlock()
}

// stopAll ends every running job: SIGTERM to its group (the persistent
// shell ignores it, its command does not), then SIGKILL.
func (d *Daemon) stopAll() {
	running := d.running()
	if len(running) == 0 {
		return
	}
	d.log.Info("Stopping jobs", "count", len(running))
	deadline := time.After(shutdownGrace)
	for _, j := range running {
		j.mu.Lock()
		j.shutdown = true
		j.mu.Unlock()
		d.signal(j, agentapi.SIGTERM, false)
	}
	for _, j := range running {
		select {
		case <-j.done:
		case <-deadline:
			for _, j := range running {
				d.signal(j, agentapi.SIGKILL, false)
			}
			for _, j := range running {
				select {
				case <-j.done:
				case <-time.After(shutdownGrace):
				}
			}
			return
		}
	}
}

func (d *Daemon) running() []*job {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []*job
	for _, j := range d.jobs {
		if !j.ended {
			out = append(out, j)
		}
	}
	return out
}

// load registers the jobs of an earlier run. A job that has no exit status
// was running when that run ended: it is lost.
func (d *Daemon) load() error {
	ents, err := os.ReadDir(d.jobsDir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		j, err := d.loadJob(e.Name())
		if err != nil {
			d.log.Error(err, "Could not read a job of an earlier run; skipping it", "job", e.Name())
			continue
		}
		if j != nil {
			d.jobs[j.id] = j
		}
	}
	return nil
}

func (d *Daemon) loadJob(id string) (*job, error) {
	dir := filepath.Join(d.jobsDir, id)
	var rec jobRecord
	if err := readJSON(filepath.Join(dir, jobFile), &rec); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil // inputs put, never started
		}
		return nil, err
	}
	sp, err := spool.Open(filepath.Join(dir, outputDir))
	if err != nil {
		return nil, err
	}
	j := newJob(id, dir, rec, sp)
	if d.users != nil {
		d.users.used(rec.UID)
	}
	var ex exitRecord
	err = readJSON(filepath.Join(dir, exitFile), &ex)
	if errors.Is(err, os.ErrNotExist) {
		d.reclaim(j)
		st := sp.Stats()
		ex = exitRecord{Lost: true, EndedAt: time.Now(), OutputBytes: st.Written, DroppedBytes: st.Dropped, LastOutput: st.LastWrite,
			Files: d.countFiles(j)}
		err = writeJSON(filepath.Join(dir, exitFile), ex)
	}
	if err != nil {
		return nil, err
	}
	_, err = os.Stat(filepath.Join(dir, deliveredFile))
	j.delivered = err == nil
	j.disk = diskUsage(dir)
	j.end(ex)
	return j, nil
}

// janitor removes the spools of jobs that ended longer than Retention ago.
func (d *Daemon) janitor(ctx context.Context) {
	if d.opts.Retention < 0 {
		return
	}
	every(ctx, janitorInterval, func() bool {
		d.sweep(time.Now().Add(-d.opts.Retention))
		return true
	})
}

// sweep removes the spools of jobs that ended before cutoff, and the
// inputs put before it for jobs that never started.
func (d *Daemon) sweep(cutoff time.Time) {
	d.mu.Lock()
	var doomed []string
	for id, j := range d.jobs {
		if j.ended && j.exit.EndedAt.Before(cutoff) {
			delete(d.jobs, id)
			doomed = append(doomed, j.dir)
		}
	}
	d.mu.Unlock()
	if ents, err := os.ReadDir(d.jobsDir); err == nil {
		for _, e := range ents {
			// Inputs put for a job that never started.
			dir := filepath.Join(d.jobsDir, e.Name())
			if _, err := os.Stat(filepath.Join(dir, jobFile)); errors.Is(err, os.ErrNotExist) {
				if fi, err := e.Info(); err == nil && fi.ModTime().Before(cutoff) {
					doomed = append(doomed, dir)
				}
			}
		}
	}
	for _, dir := range doomed {
		if err := os.RemoveAll(dir); err != nil {
			d.log.Error(err, "Could not remove an old spool", "dir", dir)
		}
	}
}

var jobID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

func checkID(id string) error {
	if !jobID.MatchString(id) {
		return fmt.Errorf("bad job id %q", id)
	}
	return nil
}

// lookup returns the job, or ErrUnknownJob.
func (d *Daemon) lookup(id string) (*job, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if j := d.jobs[id]; j != nil {
		return j, nil
	}
	return nil, fmt.Errorf("job %s: %w", id, agentapi.ErrUnknownJob)
}

// await returns the job once it has started, waiting for its start until
// ctx ends.
func (d *Daemon) await(ctx context.Context, id string) (*job, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	for {
		d.mu.Lock()
		j, started := d.jobs[id], d.started
		d.mu.Unlock()
		if j != nil {
			return j, nil
		}
		select {
		case <-started:
		case <-ctx.Done():
			return nil, fmt.Errorf("job %s did not start: %w", id, ctx.Err())
		}
	}
}

// Start runs a job once: a second start of the same job answers as the
// first and runs nothing.
func (d *Daemon) Start(req agentapi.StartRequest) (agentapi.StartResponse, error) {
	if err := checkID(req.Job); err != nil {
		return agentapi.StartResponse{}, err
	}
	d.mu.Lock()
	for {
		if j := d.jobs[req.Job]; j != nil {
			d.mu.Unlock()
			return j.resp(), nil
		}
		ch := d.starting[req.Job]
		if ch == nil {
			ch = d.putting[req.Job]
		}
		if ch == nil {
			break
		}
		d.mu.Unlock()
		<-ch
		d.mu.Lock()
	}
	if d.closing {
		d.mu.Unlock()
		return agentapi.StartResponse{}, fmt.Errorf("start %s: agent is shutting down", req.Job)
	}
	ch := make(chan struct{})
	d.starting[req.Job] = ch
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		delete(d.starting, req.Job)
		d.mu.Unlock()
		close(ch)
	}()

	if req.Shell == "" {
		req.Shell = d.opts.Shell
	}
	var (
		j      *job
		waiter func()
		err    error
	)
	switch {
	case req.Stateful && req.Console:
		err = errors.New("a job is Stateful or a Console, not both")
	case req.Stateful:
		j, waiter, err = d.startStateful(req)
	case req.Console:
		j, waiter, err = d.startConsole(req)
	default:
		j, waiter, err = d.startFork(req)
	}
	if err != nil {
		return agentapi.StartResponse{}, fmt.Errorf("start %s: %w", req.Job, err)
	}
	d.mu.Lock()
	d.jobs[j.id] = j
	d.broadcastLocked(j.startedEvent())
	close(d.started)
	d.started = make(chan struct{})
	d.mu.Unlock()
	d.log.V(1).Info("Job started", "job", j.id, "pgid", j.rec.PGID, "stateful", j.rec.Stateful, "console", j.rec.Console)
	go func() {
		waiter()
		d.finish(j)
	}()
	return j.resp(), nil
}

// prepare makes the job's directory and spool and records the command.
func (d *Daemon) prepare(req agentapi.StartRequest) (dir string, sp *spool.Spool, err error) {
	dir = filepath.Join(d.jobsDir, req.Job)
	if err := os.MkdirAll(filepath.Join(dir, filesDir), 0o755); err != nil {
		return "", nil, err
	}
	// An earlier start that failed may have left a spool: start afresh.
	if err := os.RemoveAll(filepath.Join(dir, outputDir)); err != nil {
		return "", nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, commandFile), []byte(req.Command), 0o600); err != nil {
		return "", nil, err
	}
	if d.users != nil {
		if err := os.Chmod(dir, 0o711); err != nil {
			return "", nil, err
		}
	}
	sp, err = spool.Create(filepath.Join(dir, outputDir), d.opts.Limits)
	return dir, sp, err
}

// env is the environment of a command at home, with the variables of job
// id when it is set.
func (d *Daemon) env(home, dir, id string) []string {
	own := map[string]bool{"ZDOTDIR": true, "SHELLJOB_OUT": true, "SHELLJOB_JOB": true}
	if d.users != nil {
		own["HOME"] = true
	}
	env := slices.DeleteFunc(slices.Clone(d.opts.Env), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return own[k]
	})
	env = append(env, "ZDOTDIR="+d.zdotdir)
	if !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "HOME=") }) {
		env = append(env, "HOME="+home)
	}
	if id != "" {
		env = append(env, "SHELLJOB_OUT="+filepath.Join(dir, filesDir), "SHELLJOB_JOB="+id)
	}
	return env
}

// finish closes the job's spool, takes its files back, counts them,
// records its end and reports it.
func (d *Daemon) finish(j *job) {
	if err := j.spool.Close(); err != nil {
		d.log.Error(err, "Could not close a spool", "job", j.id)
	}
	d.leaveNothing(j)
	// Its processes are gone: a kill of one of them is counted now.
	d.oom.check(d, time.Now())
	j.mu.Lock()
	code, shutdown, signals := j.code, j.shutdown, slices.Clone(j.signals)
	j.mu.Unlock()
	st := j.spool.Stats()
	ex := exitRecord{ExitCode: &code, EndedAt: time.Now(), OutputBytes: st.Written, DroppedBytes: st.Dropped, LastOutput: st.LastWrite,
		Shutdown: shutdown, Files: d.countFiles(j), Signals: signals}
	disk := diskUsage(j.dir)
	d.mu.Lock()
	ex.OOMKills = j.oomKills
	d.mu.Unlock()
	if err := writeJSON(filepath.Join(j.dir, exitFile), ex); err != nil {
		d.log.Error(err, "Could not record an exit status", "job", j.id)
	}
	d.mu.Lock()
	j.disk = disk
	j.end(ex)
	d.broadcastLocked(j.exitedEvent())
	d.mu.Unlock()
	d.log.V(1).Info("Job ended", "job", j.id, "exitCode", code, "outputBytes", st.Written, "oomKills", ex.OOMKills)
	d.makeRoom()
}

// leaveNothing ends an ended job's namespaces, if it has its own, and
// takes its files back; for a Fork job it kills what is left of its user
// and removes its files from the shared places, before its user can come
// back.
func (d *Daemon) leaveNothing(j *job) {
	if j.endSandbox != nil {
		j.endSandbox()
	}
	if d.users == nil || j.rec.Stateful || !d.users.forks.has(j.rec.UID) {
		d.reclaim(j)
		return
	}
	// Without namespaces of its own; with them, their end took every
	// process of the job.
	if j.endSandbox == nil {
		if err := d.killUser(j.rec.UID); err != nil {
			d.log.Error(err, "Could not kill what a job left running", "job", j.id)
		}
	}
	d.reclaim(j)
	if err := sweepUser(d.shared, j.rec.UID, d.users.agent, d.opts.SpoolDir, d.shellHome); err != nil {
		d.log.Error(err, "Could not remove what a job left in shared places", "job", j.id)
	}
}

// reclaim takes back what an isolated job's user was given: its files,
// its command, and its home, which goes.
func (d *Daemon) reclaim(j *job) {
	if d.users == nil {
		return
	}
	home := filepath.Join(j.dir, homeDir)
	for _, p := range []string{filepath.Join(j.dir, filesDir), filepath.Join(j.dir, commandFile), home} {
		if err := reclaim(p, d.users.agent); err != nil {
			d.log.Error(err, "Could not take a job's files back", "job", j.id, "path", p)
		}
	}
	if err := os.RemoveAll(home); err != nil {
		d.log.Error(err, "Could not remove a job's home", "job", j.id)
	}
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return nil
}

// writeJSON replaces path atomically, so that a reader after a crash finds
// the old record or the new one.
func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
