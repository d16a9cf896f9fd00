package agent

// A Console job runs its command as a Fork job does, as a user of its own
// and in namespaces of its own where the worker allows them, but with a
// pseudo-terminal for its standard streams: its slave is the controlling
// terminal of the shell's session, and the job's user owns it. The agent
// reads the master into the job's spool, as a Fork job's pipe, so the
// output is the job's like any other's.
//
// One attach at a time reaches the terminal (serveAttach): it gets the
// output from the spool, from the start, and its input and window size go
// to the master. A console is hung up, as a closed ssh session is, when
// its attach ends before it does, when whoever carried its attach says
// the attach was cut (Hangup: a runtime may keep a cut TTY exec open, so
// that the attach never learns), or when nobody attached to it within
// ConsoleAttachWait of its start: its session gets SIGHUP (and SIGCONT,
// for its stopped jobs), and SIGKILL StopGrace later if it is still
// there. Its end then leaves nothing behind, as a Fork job's.

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"shelljob.dev/shelljob/agent/proc"
	"shelljob.dev/shelljob/agent/pty"
	"shelljob.dev/shelljob/internal/agentapi"
)

// Console terminals start at this size, until an attach gives its own.
const (
	consoleRows = 24
	consoleCols = 80
)

// console is the terminal of a running Console job.
type console struct {
	// master is the pseudo-terminal's master, the job's output (job.out).
	master *os.File
	// sid is the shell's session.
	sid int
	// done is closed when the job has ended.
	done <-chan struct{}
	// hangupAfter is how long a hung-up console has before SIGKILL.
	hangupAfter time.Duration

	mu sync.Mutex
	// on is the attach on the console, nil while none is.
	on     *attachment
	hungUp bool
	// unattended hangs the console up unless an attach comes first.
	unattended *time.Timer
}

// attachment is an attach on a console.
type attachment struct {
	// session names it (agentapi.FlagSession); empty for none.
	session string
	// conn is its connection to the daemon.
	conn net.Conn
	// process, for a named attach, is the process that connected: the
	// attach subcommand, which a runtime may keep blocked for ever on the
	// output of a cut exec.
	process *os.Process
}

// end cuts the attach: its process if it has one, then its connection.
func (a *attachment) end() {
	if a.process != nil {
		_ = a.process.Kill()
	}
	a.conn.Close()
	a.drop()
}

// drop lets the attach's process go.
func (a *attachment) drop() {
	if a.process != nil {
		_ = a.process.Release()
	}
}

// namedProcess is the process of named attach a, once its name is
// checked.
func namedProcess(a *attachment) (*os.Process, error) {
	if err := checkSession(a.session); err != nil {
		return nil, err
	}
	return peerProcess(a.conn)
}

// checkSession checks an attach's name, which has the form of a job's.
func checkSession(session string) error {
	if !jobID.MatchString(session) {
		return fmt.Errorf("bad session %q", session)
	}
	return nil
}

// peerProcess is the process at the other end of conn, a unix socket, as
// it connected: a handle on it, which a later process of its pid is not.
func peerProcess(conn net.Conn) (*os.Process, error) {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return nil, fmt.Errorf("the attach's connection is no unix socket: %T", conn)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	cerr := raw.Control(func(fd uintptr) {
		cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	if err = cmp.Or(cerr, err); err != nil {
		return nil, fmt.Errorf("the attach's process: %w", err)
	}
	return os.FindProcess(int(cred.Pid))
}

// startConsole runs the command as startFork does, on a new
// pseudo-terminal.
func (d *Daemon) startConsole(req agentapi.StartRequest) (*job, func(), error) {
	path, dir, sp, err := d.prepareFork(req)
	if err != nil {
		return nil, nil, err
	}
	master, slave, err := pty.Open()
	if err == nil {
		err = pty.SetSize(master, consoleRows, consoleCols)
	}
	if err != nil {
		if master != nil {
			master.Close()
			slave.Close()
		}
		sp.Close()
		return nil, nil, err
	}
	s, uid, err := d.spawnOnTerminal(req, dir, path, slave)
	// The shell's session holds the slave now: the master reads EIO once
	// the last of its processes has closed it.
	slave.Close()
	if err != nil {
		master.Close()
		sp.Close()
		d.reclaim(&job{id: req.Job, dir: dir})
		return nil, nil, err
	}
	j, waiter, err := d.forkStarted(req, dir, sp, master, s, uid)
	if err != nil {
		return nil, nil, err
	}
	c := &console{master: master, sid: s.pid, done: j.done, hangupAfter: agentapi.StopGrace}
	c.unattended = time.AfterFunc(d.opts.ConsoleAttachWait, func() {
		if c.hangup() {
			d.log.V(1).Info("Console not attached in time; hung up", "job", j.id, "wait", d.opts.ConsoleAttachWait.String())
		}
	})
	j.console = c
	return j, func() {
		waiter()
		c.unattended.Stop()
	}, nil
}

// spawnOnTerminal starts a Console job's shell with the slave tty for its
// standard streams and its command on commandFD.
func (d *Daemon) spawnOnTerminal(req agentapi.StartRequest, dir, path string, tty *os.File) (started, int, error) {
	command, err := os.Open(filepath.Join(dir, commandFile))
	if err != nil {
		return started{}, 0, err
	}
	defer command.Close()
	return d.spawnFork(req, dir, path, []uintptr{tty.Fd(), tty.Fd(), tty.Fd(), command.Fd()}, tty)
}

// handTerminal makes the slave tty c's alone: the agent, which opened it
// and so owns it, closes it to others before it gives it away.
func handTerminal(tty *os.File, c cred) error {
	if err := tty.Chmod(0o600); err != nil {
		return fmt.Errorf("close the console's terminal to others: %w", err)
	}
	if err := tty.Chown(c.uid, c.gid); err != nil {
		return fmt.Errorf("give the console's terminal to its user: %w", err)
	}
	return nil
}

// claim takes the console for attach a, or fails with ErrAttached.
func (c *console) claim(a *attachment) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.on != nil {
		return agentapi.ErrAttached
	}
	c.on = a
	c.unattended.Stop()
	return nil
}

// release ends attach a's claim, unless a hangup took the console from it
// first; it reports whether it did.
func (c *console) release(a *attachment) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.on != a {
		return false
	}
	c.on = nil
	return true
}

// detach takes the console from its attach for a hangup of session: from
// the attach of that name, or from any with none. ok is false when
// session names an attach that is not on the console: it was refused, or
// it ended, which hung the console up. a is nil when no attach is on it.
func (c *console) detach(session string) (a *attachment, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if session != "" && (c.on == nil || c.on.session != session) {
		return nil, false
	}
	a, c.on = c.on, nil
	return a, true
}

// ended tells whether the job has ended.
func (c *console) ended() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// hangup sends the console's session SIGHUP and SIGCONT, and SIGKILL
// hangupAfter later if the job has not ended by then. Only the first call
// does anything; it reports whether it did.
func (c *console) hangup() bool {
	c.mu.Lock()
	first := !c.hungUp && !c.ended()
	c.hungUp = true
	c.mu.Unlock()
	if !first {
		return false
	}
	_, _ = proc.SignalSession(c.sid, syscall.SIGHUP)
	_, _ = proc.SignalSession(c.sid, syscall.SIGCONT)
	go func() {
		select {
		case <-c.done:
		case <-time.After(c.hangupAfter):
			_, _ = proc.SignalSession(c.sid, syscall.SIGKILL)
		}
	}()
	return true
}

// input reads an attach's input frames into the console until they
// end, and hangs the console up then.
func (c *console) input(r io.Reader) {
	defer c.hangup()
	br := bufio.NewReaderSize(r, 32<<10)
	for {
		kind, args, err := readInputHeader(br)
		if err != nil {
			return
		}
		switch kind {
		case inputData:
			if _, err := io.CopyN(masterWriter{c.master}, br, args[0]); err != nil {
				return
			}
		case inputSize:
			_ = pty.SetSize(c.master, uint16(args[0]), uint16(args[1]))
		}
	}
}

// masterWriter writes to a master that may be closed under it, at the
// job's end: the bytes are dropped then, and the attach goes on to the
// console's exit status.
type masterWriter struct{ f *os.File }

func (w masterWriter) Write(p []byte) (int, error) {
	if _, err := w.f.Write(p); err != nil && !errors.Is(err, os.ErrClosed) && !errors.Is(err, syscall.EIO) {
		return 0, err
	}
	return len(p), nil
}

// The input frames of an attach, after its request line: each a header
// line, and for data its bytes.
//
//	i N\n      then N bytes of input for the terminal
//	w ROWS COLS\n   the terminal's size
//
// The attach half-closes its side when its input ends.
const (
	inputData = 'i'
	inputSize = 'w'
	// maxInputFrame bounds a data frame.
	maxInputFrame = 1 << 20
)

// readInputHeader reads the header of an input frame.
func readInputHeader(br *bufio.Reader) (byte, []int64, error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return 0, nil, err
	}
	f := strings.Fields(string(line))
	want := map[string]int{string(inputData): 1, string(inputSize): 2}
	if len(f) == 0 || want[f[0]] == 0 || len(f)-1 != want[f[0]] {
		return 0, nil, fmt.Errorf("bad input frame %q", line)
	}
	args := make([]int64, len(f)-1)
	for i, a := range f[1:] {
		n, err := strconv.ParseInt(a, 10, 64)
		if err != nil || n < 0 || f[0] == string(inputData) && n > maxInputFrame || f[0] == string(inputSize) && n > 0xffff {
			return 0, nil, fmt.Errorf("bad input frame %q", line)
		}
		args[i] = n
	}
	return f[0][0], args, nil
}

// inputWriter writes an attach's input frames; it is safe for concurrent
// use.
type inputWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (iw *inputWriter) data(p []byte) error {
	iw.mu.Lock()
	defer iw.mu.Unlock()
	if _, err := fmt.Fprintf(iw.w, "%c %d\n", inputData, len(p)); err != nil {
		return err
	}
	_, err := iw.w.Write(p)
	return err
}

func (iw *inputWriter) size(s WindowSize) error {
	iw.mu.Lock()
	defer iw.mu.Unlock()
	_, err := fmt.Fprintf(iw.w, "%c %d %d\n", inputSize, s.Rows, s.Cols)
	return err
}

// WindowSize is a terminal's size, in characters.
type WindowSize struct{ Rows, Cols uint16 }

// exitLine ends an attach's stream, after the follow's e frame: "x CODE".
const exitLine = 'x'

// serveAttach serves attach a of Console job id, on a.conn: once the job
// has started (within AttachStartWait), its input frames from r go to the
// terminal, and its output, from the start, then its exit status, to bw.
func (d *Daemon) serveAttach(a *attachment, r io.Reader, bw *bufio.Writer, id string) error {
	if a.session != "" {
		// Its process as it connected, before a wait in which it could
		// go and its pid be taken.
		p, err := namedProcess(a)
		if err != nil {
			return d.reply(bw, errorReply(err))
		}
		a.process = p
	}
	j, c, err := d.awaitConsole(id)
	if err == nil {
		if err = c.claim(a); err != nil {
			err = fmt.Errorf("console %s: %w: it takes one attach at a time", id, err)
		}
	}
	if err != nil {
		a.drop()
		return d.reply(bw, errorReply(err))
	}
	defer func() {
		if c.release(a) {
			a.drop()
		}
	}()
	if err := d.reply(bw, reply{}); err != nil {
		c.hangup()
		return err
	}
	d.log.V(1).Info("Console attached", "job", id, "session", a.session)
	go c.input(r)
	fctx, cancelFollow := context.WithCancel(context.Background())
	defer cancelFollow()
	fw := &liveFrames{fw: agentapi.NewFrameWriter(bw), bw: bw}
	kctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() {
		// A keepalive that finds the attach gone ends the follow of a
		// quiet console.
		fw.keepAlive(kctx, d.opts.FollowKeepalive)
		cancelFollow()
	}()
	pos, err := j.spool.Follow(fctx, 0, fw)
	if err != nil {
		c.hangup()
		return err
	}
	<-j.done
	stop()
	if err := fw.end(pos); err != nil {
		return err
	}
	d.mu.Lock()
	code := j.exit.ExitCode
	d.mu.Unlock()
	if code == nil {
		return fmt.Errorf("console %s ended without an exit status", id)
	}
	return fw.send(func() error {
		_, err := fmt.Fprintf(bw, "%c %d\n", exitLine, *code)
		return err
	})
}

// awaitConsole returns Console job id and its console, once it has started
// (within AttachStartWait).
func (d *Daemon) awaitConsole(id string) (*job, *console, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d.opts.AttachStartWait)
	defer cancel()
	j, err := d.await(ctx, id)
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, nil, fmt.Errorf("console %s did not start within %v: %w", id, d.opts.AttachStartWait, agentapi.ErrUnknownJob)
	case err != nil:
		return nil, nil, err
	case !j.rec.Console:
		return nil, nil, notConsole(id)
	case j.console == nil:
		return nil, nil, fmt.Errorf("console %s ran under an earlier run of the agent, which restarted", id)
	}
	return j, j.console, nil
}

func notConsole(id string) error {
	return fmt.Errorf("job %s is no console: it runs without a terminal", id)
}

// Hangup hangs up the console of Console job id, as the end of its attach
// does, and ends that attach (agentapi.Client.Hangup): with session, only
// if the attach on the console is session's. A console that has ended is
// left as it is.
func (d *Daemon) Hangup(id, session string) error {
	if err := checkID(id); err != nil {
		return err
	}
	if session != "" {
		if err := checkSession(session); err != nil {
			return err
		}
	}
	j, err := d.lookup(id)
	switch {
	case err != nil:
		return err
	case !j.rec.Console:
		return notConsole(id)
	case j.console == nil, j.console.ended():
		// An earlier run's console ended with that run.
		return nil
	}
	a, ok := j.console.detach(session)
	if !ok {
		return nil
	}
	if j.console.hangup() {
		d.log.V(1).Info("Console hung up: its attach was cut", "job", id, "session", session)
	}
	if a != nil {
		a.end()
	}
	return nil
}
