// Package localcluster is an in-process stand-in for the cluster, for the
// bot's tests: it keeps ShellJobs in memory, gives them numbers, and runs
// their commands for real as local processes, each in a process group of
// its own with stderr merged into stdout, stopped with real signals.
package localcluster

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/bot"
	"shelljob.dev/shelljob/internal/shelljob"
)

// KillGrace is the time between the signal steps of a stop, as the
// operator's: SIGINT, then SIGTERM, then SIGKILL.
const KillGrace = 2 * time.Second

// Options configure a Cluster.
type Options struct {
	// Workers is the number of workers of each pool. Defaults to 4.
	Workers int
	// Shell runs the commands. Defaults to "sh".
	Shell string
	// Dir holds the jobs' spools and $SHELLJOB_OUT directories. Required.
	Dir string
	// Namespace of the jobs. Defaults to "default".
	Namespace string
}

// Cluster keeps jobs and runs them. It implements bot.Cluster.
type Cluster struct {
	opts Options

	mu       sync.Mutex
	next     int64
	jobs     map[string]*job
	order    []string
	revision map[string]int // pool -> revision counter
	changed  *sync.Cond
	deleted  map[string]bool
	// FailSubmit, when set, makes Submit fail.
	FailSubmit error
}

type job struct {
	obj     shellv1alpha1.ShellJob
	version int
	worker  int // -1: none
	spool   *spool
	dir     string
	cmd     *exec.Cmd
	// lost: LoseWorker ended the job.
	lost bool
}

// snapshot is a copy of j's object, with the bytes its command wrote so
// far, as the operator reports them.
func (j *job) snapshot() *shellv1alpha1.ShellJob {
	obj := j.obj.DeepCopy()
	obj.Status.OutputBytes = j.spool.len()
	return obj
}

// New returns an empty Cluster.
func New(o Options) *Cluster {
	if o.Workers == 0 {
		o.Workers = 4
	}
	if o.Shell == "" {
		o.Shell = "sh"
	}
	if o.Namespace == "" {
		o.Namespace = "default"
	}
	c := &Cluster{opts: o, jobs: map[string]*job{}, revision: map[string]int{}, deleted: map[string]bool{}}
	c.changed = sync.NewCond(&c.mu)
	return c
}

// Submit implements bot.JobSubmitter. The job is Queued with its number
// set; it starts once a worker is free (and it is not held).
func (c *Cluster) Submit(_ context.Context, name string, spec shellv1alpha1.ShellJobSpec, annotations map[string]string) (*shellv1alpha1.ShellJob, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.FailSubmit != nil {
		return nil, c.FailSubmit
	}
	if strings.ContainsRune(spec.Command, 0) {
		return nil, errors.New("command holds a NUL byte")
	}
	if spec.Pool == "" {
		spec.Pool = shellv1alpha1.DefaultPool
	}
	if spec.Mode == "" {
		spec.Mode = shellv1alpha1.ModeFork
	}
	if j, ok := c.jobs[name]; ok {
		return j.snapshot(), fmt.Errorf("create %s: %w", name, bot.ErrJobExists)
	}
	c.next++
	if name == "" {
		name = fmt.Sprintf("sj-%d", c.next)
	}
	j := &job{worker: -1, spool: newSpool()}
	j.obj = shellv1alpha1.ShellJob{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: c.opts.Namespace, UID: types.UID(fmt.Sprintf("uid-%d", c.next)),
			Annotations: annotations, CreationTimestamp: metav1.Now(),
		},
		Spec:   spec,
		Status: shellv1alpha1.ShellJobStatus{Number: c.next, Phase: shellv1alpha1.PhaseQueued},
	}
	if spec.Stop {
		// Created stopped: it never runs.
		j.obj.Status.Phase = shellv1alpha1.PhaseStopped
		now := metav1.Now()
		j.obj.Status.CompletionTime = &now
		j.spool.close()
	}
	if j.obj.Annotations == nil {
		j.obj.Annotations = map[string]string{}
	}
	j.dir = filepath.Join(c.opts.Dir, name)
	if err := os.MkdirAll(j.dir, 0o755); err != nil {
		return nil, err
	}
	c.jobs[name] = j
	c.order = append(c.order, name)
	c.scheduleLocked()
	return j.obj.DeepCopy(), nil
}

// Job returns a copy of job name.
func (c *Cluster) Job(name string) (*shellv1alpha1.ShellJob, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	j, ok := c.jobs[name]
	if !ok {
		return nil, false
	}
	return j.snapshot(), true
}

func (c *Cluster) bump(j *job) {
	j.version++
	c.changed.Broadcast()
}

// scheduleLocked gives free workers to queued jobs in FIFO order, and
// starts those that are not held.
func (c *Cluster) scheduleLocked() {
	busy := map[string]map[int]bool{}
	for _, name := range c.order {
		j := c.jobs[name]
		if j.worker >= 0 && !shelljob.IsFinished(&j.obj) && j.obj.Spec.Mode != shellv1alpha1.ModeDirect {
			if busy[j.obj.Spec.Pool] == nil {
				busy[j.obj.Spec.Pool] = map[int]bool{}
			}
			busy[j.obj.Spec.Pool][j.worker] = true
		}
	}
	for _, name := range c.order {
		j := c.jobs[name]
		if j.obj.Status.Phase != shellv1alpha1.PhaseQueued {
			continue
		}
		pool := j.obj.Spec.Pool
		if busy[pool] == nil {
			busy[pool] = map[int]bool{}
		}
		if j.worker < 0 {
			switch j.obj.Spec.Mode {
			case shellv1alpha1.ModeDirect:
				j.worker = 0
			case shellv1alpha1.ModeStateful:
				if busy[pool][0] {
					continue
				}
				j.worker = 0
				busy[pool][0] = true
			default:
				for w := 0; w < c.opts.Workers; w++ {
					if !busy[pool][w] {
						j.worker = w
						busy[pool][w] = true
						break
					}
				}
				if j.worker < 0 {
					continue
				}
			}
			j.obj.Status.Pod = fmt.Sprintf("%s-r%d-w%d", pool, c.revision[pool], j.worker)
			j.obj.Status.Revision = fmt.Sprintf("r%d", c.revision[pool])
			c.bump(j)
		}
		if !j.obj.Spec.Hold {
			c.startLocked(j)
		}
	}
}

func (c *Cluster) startLocked(j *job) {
	cmd := exec.Command(c.opts.Shell, "-c", j.obj.Spec.Command)
	cmd.Dir = j.dir
	cmd.Env = append(os.Environ(), "SHELLJOB_OUT="+j.dir)
	cmd.Stdout = j.spool
	cmd.Stderr = j.spool
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(j.spool, "%v\n", err)
		j.spool.close()
		code := int32(127)
		j.obj.Status.ExitCode = &code
		j.obj.Status.Phase = shellv1alpha1.PhaseFailed
		now := metav1.Now()
		j.obj.Status.CompletionTime = &now
		c.bump(j)
		return
	}
	j.cmd = cmd
	now := metav1.Now()
	j.obj.Status.StartTime = &now
	j.obj.Status.Phase = shellv1alpha1.PhaseRunning
	j.obj.Status.Ran = true
	j.obj.Status.PGID = int32(cmd.Process.Pid)
	c.bump(j)
	go c.wait(j)
}

func (c *Cluster) wait(j *job) {
	err := j.cmd.Wait()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		} else {
			code = ee.ExitCode()
		}
	} else if err != nil {
		code = 127
	}
	j.spool.close()
	c.mu.Lock()
	defer c.mu.Unlock()
	if j.lost {
		c.scheduleLocked()
		return
	}
	c32 := int32(code)
	j.obj.Status.ExitCode = &c32
	now := metav1.Now()
	j.obj.Status.CompletionTime = &now
	switch {
	case j.obj.Spec.Stop:
		j.obj.Status.Phase = shellv1alpha1.PhaseStopped
	case code == 0:
		j.obj.Status.Phase = shellv1alpha1.PhaseSucceeded
	default:
		j.obj.Status.Phase = shellv1alpha1.PhaseFailed
	}
	c.bump(j)
	c.scheduleLocked()
}

// Watch implements bot.JobWatcher.
func (c *Cluster) Watch(ctx context.Context, name string, fn func(*shellv1alpha1.ShellJob)) error {
	stop := context.AfterFunc(ctx, func() {
		c.mu.Lock()
		c.changed.Broadcast()
		c.mu.Unlock()
	})
	defer stop()
	seen := -1
	for {
		c.mu.Lock()
		for {
			j, ok := c.jobs[name]
			if ctx.Err() != nil || !ok || j.version != seen {
				break
			}
			c.changed.Wait()
		}
		if err := ctx.Err(); err != nil {
			c.mu.Unlock()
			return err
		}
		j, ok := c.jobs[name]
		if !ok {
			c.mu.Unlock()
			return nil
		}
		seen = j.version
		obj := j.snapshot()
		c.mu.Unlock()
		fn(obj)
	}
}

// Stop implements bot.JobStopper: a queued job is Stopped before it ran; a
// running one gets SIGINT, SIGTERM and SIGKILL, KillGrace apart, until its
// group is empty.
func (c *Cluster) Stop(_ context.Context, name string, reason shellv1alpha1.StopReason) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	j, ok := c.jobs[name]
	if !ok {
		return fmt.Errorf("shelljob %q not found", name)
	}
	if j.obj.Spec.Stop {
		return nil
	}
	j.obj.Spec.Stop = true
	if reason == "" {
		reason = shellv1alpha1.StopReasonUser
	}
	j.obj.Spec.StopReason = reason
	switch j.obj.Status.Phase {
	case shellv1alpha1.PhaseQueued:
		j.obj.Status.Phase = shellv1alpha1.PhaseStopped
		now := metav1.Now()
		j.obj.Status.CompletionTime = &now
		j.spool.close()
		c.scheduleLocked()
	case shellv1alpha1.PhaseRunning:
		j.obj.Status.Phase = shellv1alpha1.PhaseStopping
		go c.kill(j.cmd.Process.Pid)
	}
	c.bump(j)
	return nil
}

func (c *Cluster) kill(pgid int) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGKILL} {
		if err := syscall.Kill(-pgid, sig); err != nil {
			return // the group is empty
		}
		time.Sleep(KillGrace)
	}
}

// LoseWorker ends running job name as the operator does when its worker
// pod goes away: Failed, with no exit code, and the Finished condition's
// reason WorkerLost. The command is killed.
func (c *Cluster) LoseWorker(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	j, ok := c.jobs[name]
	if !ok || j.cmd == nil || shelljob.IsFinished(&j.obj) {
		return fmt.Errorf("shelljob %q is not running", name)
	}
	j.lost = true
	now := metav1.Now()
	j.obj.Status.Phase = shellv1alpha1.PhaseFailed
	j.obj.Status.CompletionTime = &now
	shelljob.SetFinishedCondition(&j.obj, now.Time, shellv1alpha1.ShellJobFinishedReasonWorkerLost, "worker pod "+j.obj.Status.Pod+" was deleted")
	_ = syscall.Kill(-j.cmd.Process.Pid, syscall.SIGKILL)
	c.bump(j)
	return nil
}

// Release implements bot.HoldReleaser.
func (c *Cluster) Release(_ context.Context, name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	j, ok := c.jobs[name]
	if !ok {
		return fmt.Errorf("shelljob %q not found", name)
	}
	j.obj.Spec.Hold = false
	c.bump(j)
	c.scheduleLocked()
	return nil
}

// Annotate implements bot.JobAnnotator.
func (c *Cluster) Annotate(_ context.Context, name, key, value string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	j, ok := c.jobs[name]
	if !ok {
		return fmt.Errorf("shelljob %q not found", name)
	}
	j.obj.Annotations[key] = value
	c.bump(j)
	return nil
}

// List implements bot.JobLister.
func (c *Cluster) List(context.Context) ([]shellv1alpha1.ShellJob, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []shellv1alpha1.ShellJob
	for _, name := range c.order {
		if j, ok := c.jobs[name]; ok && j.obj.Spec.Origin.Source == shellv1alpha1.OriginTelegram {
			out = append(out, *j.snapshot())
		}
	}
	return out, nil
}

// RestartPool implements bot.PoolRestarter: jobs that have a worker stay
// on the old revision; jobs that get one later get the new revision.
func (c *Cluster) RestartPool(_ context.Context, pool string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.revision[pool]++
	return nil
}

// Follow implements bot.OutputFollower: it copies the job's output from
// offset until the output is closed.
func (c *Cluster) Follow(ctx context.Context, sj *shellv1alpha1.ShellJob, offset int64, w io.Writer) (int64, error) {
	j := c.byUID(string(sj.UID))
	if j == nil {
		return offset, fmt.Errorf("no job %s", sj.UID)
	}
	// A job's spool is there from its submit: AwaitStart follows from 0.
	return j.spool.follow(ctx, max(offset, 0), w)
}

// PutFiles implements bot.FileMover.
func (c *Cluster) PutFiles(_ context.Context, _ types.NamespacedName, uid string, r io.Reader) error {
	j := c.byUID(uid)
	if j == nil {
		return fmt.Errorf("no job %s", uid)
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Join(j.dir, filepath.Base(h.Name))
		data, err := io.ReadAll(tr)
		if err != nil {
			return err
		}
		if err := os.WriteFile(name, data, 0o644); err != nil {
			return err
		}
	}
}

// GetFiles implements bot.FileMover.
func (c *Cluster) GetFiles(_ context.Context, _ types.NamespacedName, uid string, w io.Writer) error {
	j := c.byUID(uid)
	if j == nil {
		return fmt.Errorf("no job %s", uid)
	}
	entries, err := os.ReadDir(j.dir)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(j.dir, e.Name()))
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: e.Name(), Mode: 0o644, Size: int64(len(data))}); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	return tw.Close()
}

func (c *Cluster) byUID(uid string) *job {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, j := range c.jobs {
		if string(j.obj.UID) == uid {
			return j
		}
	}
	return nil
}

// spool is a job's output: an append-only buffer that readers follow.
type spool struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	closed bool
	wake   chan struct{}
}

func newSpool() *spool { return &spool{wake: make(chan struct{})} }

func (s *spool) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf.Write(p)
	close(s.wake)
	s.wake = make(chan struct{})
	return len(p), nil
}

func (s *spool) len() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int64(s.buf.Len())
}

func (s *spool) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.wake)
		s.wake = make(chan struct{})
	}
}

func (s *spool) follow(ctx context.Context, offset int64, w io.Writer) (int64, error) {
	for {
		s.mu.Lock()
		data := s.buf.Bytes()
		var chunk []byte
		if offset < int64(len(data)) {
			chunk = append([]byte(nil), data[offset:]...)
		}
		closed, wake := s.closed, s.wake
		s.mu.Unlock()
		if len(chunk) > 0 {
			n, err := w.Write(chunk)
			offset += int64(n)
			if err != nil {
				return offset, err
			}
			continue
		}
		if closed {
			return offset, nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return offset, ctx.Err()
		}
	}
}
