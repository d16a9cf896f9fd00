// Package jobs is the bot's registry of the jobs it shows: which chat and
// message each belongs to, and which a .k can see. Whether a job runs, is
// stopping or has ended is what its ShellJob says (Job.Observe): the bot
// keeps no copy of its own.
package jobs

import (
	"sort"
	"sync"
	"time"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/shelljob"
	"shelljob.dev/shelljob/internal/texts"
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
	// Pool is the ShellPool the job runs on.
	Pool string
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
	// stopped and reason are the ShellJob's spec.stop and stopReason.
	stopped bool
	reason  shellv1alpha1.StopReason
	preview int
	draft   int64
	// ended: the bot delivers the job's final.
	ended bool
	// waiting: the operator could not place it yet.
	waiting bool
	// own is how many of its author's jobs it waits for, at its pool's
	// maxRunningPerUser; 0 when it waits for nothing of theirs.
	own int
	// awaitingApproval: no one has decided on it yet, and its pool
	// requires someone to.
	awaitingApproval bool
	// approvalChat and approvalMsg are the message that asks for its
	// approval, 0 for none.
	approvalChat int64
	approvalMsg  int
	// stopSending ends the sending of its files, while they are sent.
	stopSending func()
	changed     chan struct{}
	done        chan struct{}
}

// New returns a queued job.
func New(i Info) *Job {
	return &Job{Info: i, summary: shelljob.Summary(i.Command), changed: make(chan struct{}, 1), done: make(chan struct{})}
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

// WaitingOwn is how many of its author's jobs the job waits for, as the
// operator said (texts.RunningOfUser): 0 when it does not wait, or waits
// for anything else.
func (j *Job) WaitingOwn() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.stateLocked() != Queued || !j.waiting {
		return 0
	}
	return j.own
}

// AwaitingApproval tells whether the job waits for someone to approve or
// deny it: the operator put it in AwaitingApproval, and no decision is
// recorded.
func (j *Job) AwaitingApproval() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return !j.ended && !j.stopped && j.awaitingApproval
}

// SetApprovalMessage records the message that asks for the job's
// approval: message msg of chat.
func (j *Job) SetApprovalMessage(chat int64, msg int) {
	j.mu.Lock()
	j.approvalChat, j.approvalMsg = chat, msg
	j.mu.Unlock()
}

// ApprovalMessage is the chat and the id of the message that asks for the
// job's approval, zeros for none.
func (j *Job) ApprovalMessage() (int64, int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.approvalChat, j.approvalMsg
}

// Stopped returns whether the job was asked to stop, and why.
func (j *Job) Stopped() (bool, shellv1alpha1.StopReason) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.stopped, j.reason
}

// Observe records the ShellJob's status and spec: the latest the bot has.
func (j *Job) Observe(obj *shellv1alpha1.ShellJob) {
	j.mu.Lock()
	if obj.Status.Number != 0 {
		j.number = obj.Status.Number
	}
	j.summary = shelljob.SummaryOf(obj)
	j.waiting = shelljob.IsWaiting(obj)
	j.own, _ = texts.RunningOfUser(obj)
	j.awaitingApproval = shelljob.IsAwaitingApproval(obj) && obj.Spec.Approval == nil
	phase := shelljob.Phase(obj)
	switch {
	case shelljob.IsFinished(obj):
		if obj.Status.Ran {
			j.state = Running
		}
		j.ended = true
	case phase == shellv1alpha1.PhaseRunning, phase == shellv1alpha1.PhaseStopping:
		j.state = Running
	case phase == shellv1alpha1.PhaseQueued:
		j.state = Queued
	default:
		// A phase of a newer operator: the state stays as it was, and
		// the job ends when shelljob.IsFinished says so.
	}
	j.stopped = shelljob.IsStopRequested(obj) || phase == shellv1alpha1.PhaseStopping
	j.reason = ""
	if j.stopped {
		j.reason = shelljob.RequestedStopReason(obj)
	}
	j.mu.Unlock()
	j.notify()
}

// SetSending records what stops the sending of the job's files while
// they are sent; nil once they are.
func (j *Job) SetSending(stop func()) {
	j.mu.Lock()
	j.stopSending = stop
	j.mu.Unlock()
}

// Sending tells whether the job's files are being sent.
func (j *Job) Sending() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.stopSending != nil
}

// StopSending stops the sending of the job's files, and tells whether it
// was under way.
func (j *Job) StopSending() bool {
	j.mu.Lock()
	stop := j.stopSending
	j.stopSending = nil
	j.mu.Unlock()
	if stop != nil {
		stop()
	}
	return stop != nil
}

// MarkEnded records that the bot delivers the job's final, whatever its
// ShellJob says (a job deleted before it ended, say).
func (j *Job) MarkEnded() {
	j.mu.Lock()
	j.ended = true
	j.mu.Unlock()
	j.notify()
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

// Register adds j, and tells whether the registry is closed: a shutdown
// began, and j must be stopped.
func (r *Registry) Register(j *Job) (closed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.jobs[j.Name] = j
	return r.closed
}

// Close closes the registry: a shutdown began.
func (r *Registry) Close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
}

// Closed tells whether the registry was closed.
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

// ByUID returns the job whose ShellJob has uid.
func (r *Registry) ByUID(uid string) *Job {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, j := range r.jobs {
		if j.UID == uid {
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

// Unfinished keeps the jobs a .k can stop: Queued, Running or Stopping,
// or whose files are being sent.
func Unfinished(js []*Job) []*Job {
	var out []*Job
	for _, j := range js {
		if j.State() != Ended || j.Sending() {
			out = append(out, j)
		}
	}
	return out
}

// WaitAll waits until every job is finished, or wait fires, and returns
// how many were not finished.
func (r *Registry) WaitAll(wait <-chan time.Time) int {
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
