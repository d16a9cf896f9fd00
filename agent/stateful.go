package agent

// The persistent shell runs Stateful jobs, one at a time, and keeps their
// cwd, variables, functions, aliases, options and traps between them.
//
// It is `zsh -i` in a session of its own, reading one line per job from a
// pipe, with job control off (so the command's processes share the
// shell's process group) and no prompt. Interactive matters for stops: on
// SIGINT an interactive zsh abandons the line it runs and reads the next,
// where a non-interactive one would exit. It ignores SIGTERM, so a job's
// TERM ends the processes it started and the command goes on, as brish's
// worker did; SIGKILL ends the shell too.
//
// A job's line runs the command with eval inside { } always { }: the
// always block reports the status on the control pipe (fd ctlFD) even
// after an interrupt, mapping a builtin loop's interrupted status to 130
// as a shell that died of SIGINT would report it. Output goes to a FIFO of
// the job, so that each job gets EOF of its own.
//
// A shell that ends (exit in a command, SIGKILL at the last stop step, a
// crash) ends the job it ran with the shell's status, and the next
// Stateful job boots a new one. That loses everything the old one held:
// cwd (back to home), variables, functions, aliases, options, traps and
// its background jobs: where the shell has namespaces of its own
// (sandbox.go), its processes end with it; elsewhere they live on.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"shelljob.dev/shelljob/agent/proc"
	"shelljob.dev/shelljob/internal/agentapi"
)

const (
	// ctlFD is where the persistent shell finds the control pipe: high,
	// away from the descriptors a command redirects itself.
	ctlFD = 63
	// shellAckTimeout bounds the wait for the persistent shell to boot or
	// to begin a job's line; one that takes longer is stuck, and is killed.
	shellAckTimeout = 10 * time.Second
	// ctlDrain is how long the last lines of a shell that ended may take to
	// come through: they are in the pipe already, only its reader may lag.
	ctlDrain = 500 * time.Millisecond
)

// bootLine sets the persistent shell up: no prompts, no job control, no
// HUP for background jobs when it ends, no history file.
const bootLine = `PS1='' PS2='' PS3='' PS4='+ ' RPS1='' RPS2='' PROMPT_EOL_MARK=''; unset HISTFILE; ` +
	`setopt no_monitor no_hup no_check_jobs no_notify no_beep no_prompt_cr no_prompt_sp; print -u 63 r`

// ctlMsg is a line of the control pipe: "r" (booted), "s JOB" (the job's
// line began) or "d JOB STATUS" (its command is done).
type ctlMsg struct {
	kind byte
	job  string
	code int
}

type pshell struct {
	pid   int
	stdin *os.File
	msgs  chan ctlMsg
	// gone is closed once the shell has ended, with status.
	gone   chan struct{}
	status proc.Status
	// job is the last job it ran; guarded by Daemon.shellMu.
	job *job
}

func (s *pshell) isGone() bool {
	select {
	case <-s.gone:
		return true
	default:
		return false
	}
}

func (s *pshell) kill() { _, _ = proc.Signal(s.pid, syscall.SIGKILL) }

// await waits for the control message kind of job id (empty for none),
// for at most timeout, or as long as the shell lives when it is 0.
func (s *pshell) await(kind byte, id string, timeout time.Duration) (ctlMsg, error) {
	var expired <-chan time.Time
	if timeout > 0 {
		expired = time.After(timeout)
	}
	for {
		select {
		case m := <-s.msgs:
			if m.kind == kind && m.job == id {
				return m, nil
			}
		case <-s.gone:
			drained := time.After(ctlDrain)
			for {
				select {
				case m := <-s.msgs:
					if m.kind == kind && m.job == id {
						return m, nil
					}
				case <-drained:
					return ctlMsg{}, fmt.Errorf("persistent shell ended (%v)", s.status)
				}
			}
		case <-expired:
			s.kill()
			return ctlMsg{}, fmt.Errorf("persistent shell stuck for %v; killed", timeout)
		}
	}
}

// bootShell starts a persistent shell and waits until it is ready.
func (d *Daemon) bootShell(shell string) (*pshell, error) {
	path, err := exec.LookPath(shell)
	if err != nil {
		return nil, err
	}
	if filepath.Base(path) != "zsh" {
		return nil, fmt.Errorf("stateful jobs need zsh, not %s", shell)
	}
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		ctlR.Close()
		ctlW.Close()
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		ctlR.Close()
		ctlW.Close()
		inR.Close()
		inW.Close()
		return nil, err
	}
	files := make([]uintptr, ctlFD+1)
	for i := range files {
		files[i] = ^uintptr(0) // closed in the shell
	}
	files[0], files[1], files[2], files[ctlFD] = inR.Fd(), outW.Fd(), outW.Fd(), ctlW.Fd()
	attr := &syscall.ProcAttr{
		Dir:   d.shellHome,
		Env:   d.env(d.shellHome, "", ""),
		Files: files,
		Sys:   &syscall.SysProcAttr{Setsid: true},
	}
	var c *cred
	if d.users != nil {
		u := d.users.stateful()
		c = &u
	}
	s, err := d.spawn(path, []string{"zsh", "-i"}, attr, c)
	pid, exited := s.pid, s.exited
	inR.Close()
	outW.Close()
	ctlW.Close()
	if err != nil {
		ctlR.Close()
		inW.Close()
		outR.Close()
		return nil, err
	}
	sh := &pshell{pid: pid, stdin: inW, msgs: make(chan ctlMsg, 16), gone: make(chan struct{})}
	log := d.log.WithValues("shellPID", pid)
	go func() {
		sh.status = <-exited
		if s.end != nil {
			// What the shell's jobs left ends with it.
			s.end()
		}
		close(sh.gone)
		inW.Close()
		log.Info("Persistent shell ended", "status", sh.status.String())
	}()
	go readControl(ctlR, sh.msgs)
	go func() {
		// What the shell itself prints (its first prompt, errors of a line)
		// is no job's output.
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			log.V(2).Info("Persistent shell output", "output", sc.Text())
		}
		_, _ = io.Copy(io.Discard, outR)
		outR.Close()
	}()
	if _, err := io.WriteString(inW, bootLine+"\n"); err != nil {
		sh.kill()
		return nil, fmt.Errorf("boot persistent shell: %w", err)
	}
	if _, err := sh.await('r', "", shellAckTimeout); err != nil {
		return nil, fmt.Errorf("boot persistent shell: %w", err)
	}
	log.Info("Persistent shell ready")
	return sh, nil
}

// readControl parses the control pipe into msgs. Lines it does not know,
// or that nobody awaits, are dropped: a command may write there too.
func readControl(r io.ReadCloser, msgs chan<- ctlMsg) {
	defer r.Close()
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || len(f[0]) != 1 {
			continue
		}
		m := ctlMsg{kind: f[0][0]}
		if len(f) > 1 {
			m.job = f[1]
		}
		if m.kind == 'd' {
			if len(f) != 3 {
				continue
			}
			c, err := strconv.Atoi(f[2])
			if err != nil {
				continue
			}
			m.code = c
		}
		select {
		case msgs <- m:
		default:
		}
	}
}

// quote makes s one word for the shell.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// jobLine is the line that runs a job in the persistent shell.
func jobLine(id, files, command, fifo string) string {
	return fmt.Sprintf(`{ print -u %[1]d s %[2]s; export SHELLJOB_OUT=%[3]s SHELLJOB_JOB=%[2]s; eval "$(<%[4]s)"; } `+
		`always { __shelljob_status=$?; (( TRY_BLOCK_INTERRUPT && __shelljob_status < 128 )) && __shelljob_status=130; `+
		`print -u %[1]d d %[2]s $__shelljob_status; } </dev/null >%[5]s 2>&1`,
		ctlFD, id, quote(files), quote(command), quote(fifo))
}

// startStateful feeds the command to the persistent shell, booting one if
// there is none.
func (d *Daemon) startStateful(req agentapi.StartRequest) (*job, func(), error) {
	d.shellMu.Lock()
	defer d.shellMu.Unlock()
	if sh := d.shell; sh != nil && sh.job != nil {
		prev := sh.job
		if prev.spool.Stats().Closed {
			// Its output is closed, so its end is being recorded: a caller
			// whose follow just ended may start the next job at once.
			<-prev.done
		}
		d.mu.Lock()
		busy := !prev.ended
		d.mu.Unlock()
		if busy {
			return nil, nil, fmt.Errorf("job %s still runs: %w", prev.id, agentapi.ErrBusy)
		}
	}
	if d.shell == nil || d.shell.isGone() {
		sh, err := d.bootShell(req.Shell)
		if err != nil {
			return nil, nil, err
		}
		d.shell = sh
	}
	sh := d.shell
	dir, sp, err := d.prepare(req)
	if err != nil {
		return nil, nil, err
	}
	fifo := filepath.Join(dir, fifoFile)
	out, err := openFIFO(fifo)
	if err != nil {
		sp.Close()
		return nil, nil, err
	}
	// Held until the shell has opened the FIFO, so that the reader does
	// not see EOF before it.
	keep, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err == nil && d.users != nil {
		// The shell reads the command and writes the FIFO as its own user;
		// the job's files are its while the job runs.
		if err = d.isolateStateful(dir); err != nil {
			keep.Close()
		}
	}
	if err != nil {
		out.Close()
		sp.Close()
		d.reclaim(&job{id: req.Job, dir: dir})
		return nil, nil, err
	}
	for drained := false; !drained; {
		select {
		case <-sh.msgs:
		default:
			drained = true
		}
	}
	line := jobLine(req.Job, filepath.Join(dir, filesDir), filepath.Join(dir, commandFile), fifo)
	startedAt := time.Now()
	_, err = io.WriteString(sh.stdin, line+"\n")
	if err == nil {
		_, err = sh.await('s', req.Job, shellAckTimeout)
	}
	keep.Close()
	if err != nil {
		out.Close()
		sp.Close()
		os.Remove(fifo)
		d.reclaim(&job{id: req.Job, dir: dir})
		return nil, nil, err
	}
	rec := jobRecord{Job: req.Job, Stateful: true, Shell: req.Shell, PGID: sh.pid, StartedAt: startedAt}
	if d.users != nil {
		rec.UID = StatefulUID
	}
	if err := writeJSON(filepath.Join(dir, jobFile), rec); err != nil {
		d.log.Error(err, "Could not record a start", "job", req.Job)
	}
	j := newJob(req.Job, dir, rec, sp)
	j.out = out
	j.probe = func() (bool, bool) {
		if sh.isGone() {
			e := proc.GroupEmpty(sh.pid, 0)
			return e, e
		}
		j.mu.Lock()
		exited := j.exited
		j.mu.Unlock()
		return exited && proc.GroupEmpty(sh.pid, sh.pid), false
	}
	sh.job = j
	go d.produce(j)
	return j, func() {
		m, err := sh.await('d', j.id, 0)
		if err != nil {
			m.code = sh.status.Code() // the shell ended without a word
		}
		j.setExited(m.code)
		d.awaitOutput(j)
		if err := os.Remove(fifo); err != nil && !errors.Is(err, os.ErrNotExist) {
			d.log.Error(err, "Could not remove a FIFO", "job", j.id)
		}
	}, nil
}

// isolateStateful gives the persistent shell's user what it needs of the
// Stateful job in dir: its command, its FIFO and its files.
func (d *Daemon) isolateStateful(dir string) error {
	c := d.users.stateful()
	for _, p := range []string{filepath.Join(dir, commandFile), filepath.Join(dir, fifoFile)} {
		if err := os.Lchown(p, c.uid, c.gid); err != nil {
			return err
		}
	}
	return hand(filepath.Join(dir, filesDir), c)
}

// openFIFO makes a FIFO at path and opens its read end without waiting for
// a writer; reads go through Go's poller, so Close ends a blocked Read.
func openFIFO(path string) (*os.File, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		return nil, fmt.Errorf("mkfifo %s: %w", path, err)
	}
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
