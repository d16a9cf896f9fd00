package agent

import (
	"io"
	"os"

	"shelljob.dev/shelljob/internal/agentapi"
)

// A sandboxed Fork job's init is made ahead of the job (warmInit): the
// clone of its namespaces and the start of the agent's binary in them,
// about half of such a start, are then off the way of its first byte. The
// init waits for its spec, as the user it was made for, which no other
// job gets while it lives (users.fork skips a live user); the job's
// directory, home and command come with its start.

// warmInit is an init made ahead of a Fork job, with the job's output and
// command pipes for descriptors.
type warmInit struct {
	init *pendingInit
	c    cred
	// out is the read end of the job's output; cmd the write end of its
	// command.
	out, cmd *os.File
}

// drop kills an init that no job took, and closes its pipes.
func (w *warmInit) drop() {
	w.init.end()
	w.out.Close()
	w.cmd.Close()
}

// warmUp makes the next Fork job's init, unless one waits already, or
// jobs have no sandbox.
func (d *Daemon) warmUp() {
	if !d.sandboxed {
		return
	}
	d.mu.Lock()
	if d.closing || d.warm != nil || d.warming {
		d.mu.Unlock()
		return
	}
	d.warming = true
	d.mu.Unlock()
	w, err := d.makeWarm()
	d.mu.Lock()
	d.warming = false
	closing := d.closing
	if err == nil && !closing {
		d.warm = w
	}
	d.mu.Unlock()
	switch {
	case err != nil:
		d.log.V(1).Info("Could not make the next job's init ahead; it is made with its job", "err", err.Error())
	case closing:
		w.drop()
	}
}

// makeWarm starts an init for the next Fork job.
func (d *Daemon) makeWarm() (*warmInit, error) {
	c, err := d.users.fork()
	if err != nil {
		return nil, err
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		return nil, err
	}
	defer null.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer outW.Close()
	setPipeSize(outW)
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		outR.Close()
		return nil, err
	}
	defer cmdR.Close()
	p, err := d.launchInit([]uintptr{null.Fd(), outW.Fd(), outW.Fd(), cmdR.Fd()}, c)
	if err != nil {
		outR.Close()
		cmdW.Close()
		return nil, err
	}
	return &warmInit{init: p, c: c, out: outR, cmd: cmdW}, nil
}

// takeWarm returns the init made ahead, if one waits and lives, and
// starts making the next.
func (d *Daemon) takeWarm() *warmInit {
	if !d.sandboxed {
		return nil
	}
	d.mu.Lock()
	w := d.warm
	d.warm = nil
	d.mu.Unlock()
	go d.warmUp()
	if w != nil && !w.init.alive() {
		w.drop()
		return nil
	}
	return w
}

// dropWarm kills the init made ahead, if any: the agent ends.
func (d *Daemon) dropWarm() {
	d.mu.Lock()
	w := d.warm
	d.warm = nil
	d.mu.Unlock()
	if w != nil {
		w.drop()
	}
}

// startForkWarm starts a Fork job on the init w made ahead.
func (d *Daemon) startForkWarm(req agentapi.StartRequest, w *warmInit) (*job, func(), error) {
	path, dir, sp, err := d.prepareFork(req)
	if err != nil {
		w.drop()
		return nil, nil, err
	}
	home, err := d.forkHome(dir, w.c)
	if err != nil {
		w.drop()
		sp.Close()
		d.reclaim(&job{id: req.Job, dir: dir})
		return nil, nil, err
	}
	// The shell reads the command to its end (shellArgv); a shell that
	// ends first breaks the pipe, which ends the write.
	go func() {
		_, _ = io.WriteString(w.cmd, req.Command)
		w.cmd.Close()
	}()
	s, err := w.init.run(initSpec{Path: path, Argv: shellArgv(req.Shell), Env: d.env(home, dir, req.Job), Dir: home})
	if err != nil {
		w.out.Close()
		sp.Close()
		d.reclaim(&job{id: req.Job, dir: dir})
		return nil, nil, err
	}
	d.log.V(1).Info("Job started on an init made ahead", "job", req.Job)
	return d.forkStarted(req, dir, sp, w.out, s, w.c.uid)
}
