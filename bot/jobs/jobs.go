// Package jobs is the bot's registry of the jobs it shows: which chat and
// message each belongs to, which a .k can see, and the stop that .k, a Stop
// button and a shutdown share.
package jobs

import (
	"sort"
	"sync"
	"time"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/shelljob"
)

// State is where a job is, as the bot sees it.
type State int

const (
	// Queued: waiting for a shell.
	Queued State = iota
	// Running: the command runs.
	Running
	// Stopping: asked to stop; the command may still be ending.
	Stopping
	// Ended: the command has ended; its final or files may still be sent.
	Ended
)

// Outcome is what a stop did.
type Outcome int

const (
	// OutcomeStopping: the job was running and is now asked to stop.
	OutcomeStopping Outcome = iota
	// OutcomeNotStarted: the job was still waiting and will never run.
	OutcomeNotStarted
	// OutcomeAlreadyStopping: an earlier stop stands.
	OutcomeAlreadyStopping
	// OutcomeFinished: the command has already ended.
	OutcomeFinished
)

// Info are the fixed facts of a job.
type Info struct {
	// Name and UID of the ShellJob.
	Name, UID string
	// Owner is the admin who sent the command.
	Owner int64
	// Chat is the Bot API chat id; 0 for a guest job.
	Chat int64
	// CommandMsg is the id of the command message in Chat.
	CommandMsg int
	// Guest is the guest thread key of a guest job: the guest chat.
	Guest string
	// Command is the shell code.
	Command string
	// Created is when the bot took the command.
	Created time.Time
}

// Job is one command the bot shows, from its creation until its final and
// files are delivered.
type Job struct {
	Info

	mu      sync.Mutex
	number  int64
	summary string
	state   State
	stopped bool
	reason  shellv1alpha1.StopReason
	preview int
	draft   int64
	ended   bool
	// waiting: the operator could not place it yet.
	waiting bool
	onStop  func(shellv1alpha1.StopReason)
	changed chan struct{}
	done    chan struct{}
}

// New returns a queued job; onStop is called once, by the first Cancel
// that stops it, to ask the cluster.
func New(i Info, onStop func(shellv1alpha1.StopReason)) *Job {
	return &Job{Info: i, summary: shelljob.Summary(i.Command), onStop: onStop, changed: make(chan struct{}, 1), done: make(chan struct{})}
}

func (j *Job) notify() {
	select {
	case j.changed <- struct{}{}:
	default:
	}
}

// Changed is signalled after a change of state, at most one wake pending.
func (j *Job) Changed() <-chan struct{} { return j.changed }

// Done is closed once the job is finished in its registry.
func (j *Job) Done() <-chan struct{} { return j.done }

// Number is the job's #N, 0 until known.
func (j *Job) Number() int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.number
}

// Summary is the command's summary, as the ShellJob's status has it
// (shelljob.SummaryOf).
func (j *Job) Summary() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.summary
}

// SetNumber records #N.
func (j *Job) SetNumber(n int64) {
	j.mu.Lock()
	j.number = n
	j.mu.Unlock()
	j.notify()
}

// State returns the state; a stopped job that has not ended is Stopping.
func (j *Job) State() State {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.stateLocked()
}

func (j *Job) stateLocked() State {
	if j.ended {
		return Ended
	}
	if j.stopped {
		return Stopping
	}
	return j.state
}

// Waiting tells whether the job waits for a free shell, as the operator
// said (shelljob.IsWaiting). A job placed on a worker but not started yet
// is not waiting.
func (j *Job) Waiting() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.stateLocked() == Queued && j.waiting
}

// Stopped returns whether the job was stopped, and why.
func (j *Job) Stopped() (bool, shellv1alpha1.StopReason) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.stopped, j.reason
}

// Observe records the ShellJob's status and spec.
func (j *Job) Observe(obj *shellv1alpha1.ShellJob) {
	j.mu.Lock()
	if obj.Status.Number != 0 {
		j.number = obj.Status.Number
	}
	j.summary = shelljob.SummaryOf(obj)
	j.waiting = shelljob.IsWaiting(obj)
	switch phase := shelljob.Phase(obj); {
	case shelljob.IsFinished(obj):
		if obj.Status.Ran {
			j.state = Running
		}
	case phase == shellv1alpha1.PhaseRunning:
		j.state = Running
	case phase == shellv1alpha1.PhaseStopping:
		j.state = Running
		j.markStoppedLocked(obj.Spec.StopReason)
	case phase == shellv1alpha1.PhaseQueued:
		j.state = Queued
	default:
		// A phase of a newer operator: the state stays as it was, and
		// the job ends when shelljob.IsFinished says so.
	}
	if obj.Spec.Stop {
		j.markStoppedLocked(obj.Spec.StopReason)
	}
	j.mu.Unlock()
	j.notify()
}

func (j *Job) markStoppedLocked(r shellv1alpha1.StopReason) {
	if j.stopped {
		return
	}
	if r == "" {
		r = shellv1alpha1.StopReasonUser
	}
	j.stopped, j.reason = true, r
}

// MarkEnded records that the command has ended; a later Cancel finds it
// finished.
func (j *Job) MarkEnded() {
	j.mu.Lock()
	j.ended = true
	j.mu.Unlock()
	j.notify()
}

// Cancel stops the job for reason. Only the first stop counts.
func (j *Job) Cancel(reason shellv1alpha1.StopReason) Outcome {
	j.mu.Lock()
	switch {
	case j.ended:
		j.mu.Unlock()
		return OutcomeFinished
	case j.stopped:
		j.mu.Unlock()
		return OutcomeAlreadyStopping
	}
	j.stopped, j.reason = true, reason
	out := OutcomeStopping
	if j.state == Queued {
		out = OutcomeNotStarted
	}
	onStop := j.onStop
	j.mu.Unlock()
	j.notify()
	if onStop != nil {
		onStop(reason)
	}
	return out
}

// SetPreview records the message id of the job's edited preview, or the
// random id of its draft.
func (j *Job) SetPreview(msg int, draft int64) {
	j.mu.Lock()
	j.preview, j.draft = msg, draft
	j.mu.Unlock()
}

// Preview returns the preview's message id and draft id.
func (j *Job) Preview() (int, int64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.preview, j.draft
}

// Registry holds the jobs the bot shows.
type Registry struct {
	mu   sync.Mutex
	jobs map[string]*Job
	// closed makes Register stop new jobs at once, during a shutdown.
	closed bool
}

// NewRegistry returns an empty Registry.
func NewRegistry() *Registry { return &Registry{jobs: map[string]*Job{}} }

// Register adds j. During a shutdown it is stopped at once, with reason
// Shutdown, so its command never runs; its final is still delivered.
func (r *Registry) Register(j *Job) {
	r.mu.Lock()
	r.jobs[j.Name] = j
	closed := r.closed
	r.mu.Unlock()
	if closed {
		j.Cancel(shellv1alpha1.StopReasonShutdown)
	}
}

// Closed tells whether StopAll has closed the registry.
func (r *Registry) Closed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// Finish forgets j once everything of it is delivered.
func (r *Registry) Finish(j *Job) {
	r.mu.Lock()
	if r.jobs[j.Name] == j {
		delete(r.jobs, j.Name)
	}
	r.mu.Unlock()
	j.mu.Lock()
	select {
	case <-j.done:
	default:
		close(j.done)
	}
	j.mu.Unlock()
}

// All returns every job, oldest first.
func (r *Registry) All() []*Job {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*Job, 0, len(r.jobs))
	for _, j := range r.jobs {
		out = append(out, j)
	}
	sort.Slice(out, func(a, b int) bool {
		if !out[a].Created.Equal(out[b].Created) {
			return out[a].Created.Before(out[b].Created)
		}
		return out[a].Number() < out[b].Number()
	})
	return out
}

// Get returns the job named name.
func (r *Registry) Get(name string) *Job {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.jobs[name]
}

// Find returns the job whose command or edited preview is message msg of
// chat.
func (r *Registry) Find(chat int64, msg int) *Job {
	for _, j := range r.All() {
		p, _ := j.Preview()
		if j.Chat == chat && (j.CommandMsg == msg || p == msg) {
			return j
		}
	}
	return nil
}

// ByNumber returns the job #n.
func (r *Registry) ByNumber(n int64) *Job {
	for _, j := range r.All() {
		if j.Number() == n {
			return j
		}
	}
	return nil
}

// ByDraft returns the job whose draft in user's private chat has random id
// draft.
func (r *Registry) ByDraft(user, draft int64) *Job {
	for _, j := range r.All() {
		if _, d := j.Preview(); d == draft && j.Chat == user {
			return j
		}
	}
	return nil
}

// Visible returns the jobs a .k can see: with a guest thread key, the
// caller's jobs of that guest chat; otherwise the jobs of chat, and in the
// caller's private chat with the bot also the caller's guest jobs.
func (r *Registry) Visible(chat, caller int64, guest string) []*Job {
	var out []*Job
	for _, j := range r.All() {
		switch {
		case guest != "":
			if j.Guest == guest && j.Owner == caller {
				out = append(out, j)
			}
		case j.Guest == "" && j.Chat == chat:
			out = append(out, j)
		case j.Guest != "" && chat == caller && j.Owner == caller:
			out = append(out, j)
		}
	}
	return out
}

// Unfinished keeps the jobs that are Queued, Running or Stopping.
func Unfinished(js []*Job) []*Job {
	var out []*Job
	for _, j := range js {
		if j.State() != Ended {
			out = append(out, j)
		}
	}
	return out
}

// StopAll closes the registry to new jobs, stops every job with reason,
// and waits until each is finished or ctx ends. It returns how many were
// not finished.
func (r *Registry) StopAll(reason shellv1alpha1.StopReason, wait <-chan time.Time) int {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	for _, j := range r.All() {
		j.Cancel(reason)
	}
	for {
		left := r.All()
		if len(left) == 0 {
			return 0
		}
		select {
		case <-left[0].Done():
		case <-wait:
			return len(r.All())
		}
	}
}
