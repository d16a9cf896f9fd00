package controllers

import (
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
)

// jobMemory is what this process remembers of the unfinished jobs, by
// name, beyond what their status holds: the number taken for a job whose
// status does not show it yet, the Starts made, the signals sent with
// their exact times, when its placement was recorded, and what its
// worker's agent reported. One map, one lock; a job's memory goes, all of
// it, with forget: once its end is recorded, or it is deleted. A job of
// the same name with another UID is another job: what is remembered of
// the old one goes as the new one is remembered.
type jobMemory struct {
	mu   sync.Mutex
	jobs map[types.NamespacedName]*jobMemo
	// startCalls names the jobs this process called Start for, by UID: an
	// agent's report of one can come before the cache shows the placement
	// that the agents' index of jobs needs.
	startCalls map[types.UID]types.NamespacedName
}

// jobMemo is what is remembered of one job.
type jobMemo struct {
	uid types.UID
	// number is the number taken for the job, 0 for none: a retried
	// reconcile reuses it rather than take another.
	number int64
	// starts counts the Start calls made in this process.
	starts int
	// stops are the signals sent in this process, with their exact
	// times: the API keeps whole seconds only, and a pass that reads a
	// stale job must not send a signal twice.
	stops []sentSignal
	// placedAt is when this process recorded the placement, exactly, for
	// the start latency; zero once the command started.
	placedAt time.Time
	// facts are what the worker's agent reported, if reported.
	facts    agentFacts
	reported bool
}

type sentSignal struct {
	step shellv1alpha1.StopStep
	at   time.Time
	// reason is the stop's reason the signal was sent for: the status
	// write that records it may conflict, and the next pass must not end
	// the job as stopped for no reason.
	reason shellv1alpha1.StopReason
}

// agentFacts is what a worker's agent reported of one job.
type agentFacts struct {
	Pod       string
	PGID      int
	StartedAt time.Time
	// Exited is set once the command has ended and its output is closed.
	Exited   bool
	ExitCode *int
	ExitedAt time.Time
	// Lost is set with Exited when the agent restarted while the command
	// ran: its exit status is unknown.
	Lost bool
	// Unknown is set when the agent's replay did not name a job that had
	// started on the pod before the stream opened: its spool is gone.
	Unknown bool
	// OutputBytes and DroppedBytes count written and not kept bytes.
	OutputBytes  int64
	DroppedBytes int64
	// LastOutput is when the command last wrote; zero if it never did.
	LastOutput time.Time
	// OOMKills counts the worker's out-of-memory kills while the command
	// ran; set with Exited.
	OOMKills int64
	// Shutdown is set with Exited when the agent stopped the command on
	// its way out: the worker pod is ending.
	Shutdown bool
	// Files counts the files the command left in $SHELLJOB_OUT; set with
	// Exited by an agent that counts them.
	Files *agentapi.Files
	// Signals are the signals the agent sent to the job's group when
	// asked; set with Exited.
	Signals []agentapi.SentSignal
}

func newJobMemory() *jobMemory {
	return &jobMemory{jobs: map[types.NamespacedName]*jobMemo{}, startCalls: map[types.UID]types.NamespacedName{}}
}

// memo is the memo of the job, made if there is none; call with m.mu held.
func (m *jobMemory) memo(key types.NamespacedName, uid types.UID) *jobMemo {
	j, ok := m.jobs[key]
	if !ok || j.uid != uid {
		if ok {
			delete(m.startCalls, j.uid)
		}
		j = &jobMemo{uid: uid}
		m.jobs[key] = j
	}
	return j
}

// read calls f with the job's memo, or with an empty one if nothing is
// remembered of it; f must not keep it.
func (m *jobMemory) read(key types.NamespacedName, uid types.UID, f func(*jobMemo)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	j, ok := m.jobs[key]
	if !ok || j.uid != uid {
		j = &jobMemo{uid: uid}
	}
	f(j)
}

// write calls f with the job's memo, which it may change.
func (m *jobMemory) write(key types.NamespacedName, uid types.UID, f func(*jobMemo)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f(m.memo(key, uid))
}

// forget drops what is remembered of the job of that name: of any UID
// when uid is empty, else only if it is that one.
func (m *jobMemory) forget(key types.NamespacedName, uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if j, ok := m.jobs[key]; ok && (uid == "" || j.uid == uid) {
		delete(m.jobs, key)
		delete(m.startCalls, j.uid)
	}
}

// track remembers that the job of that name has uid: what is remembered
// of an older job of the same name, deleted and made again before a pass
// found it gone, goes.
func (m *jobMemory) track(key types.NamespacedName, uid types.UID) {
	m.write(key, uid, func(*jobMemo) {})
}

// number is the number taken for the job, 0 if none.
func (m *jobMemory) number(key types.NamespacedName, uid types.UID) (n int64) {
	m.read(key, uid, func(j *jobMemo) { n = j.number })
	return n
}

// setNumber remembers the number taken for the job; 0 drops it, once the
// job's status shows it.
func (m *jobMemory) setNumber(key types.NamespacedName, uid types.UID, n int64) {
	m.write(key, uid, func(j *jobMemo) { j.number = n })
}

// noteStart counts a Start call, and returns how many were made.
func (m *jobMemory) noteStart(key types.NamespacedName, uid types.UID) (n int) {
	m.write(key, uid, func(j *jobMemo) {
		j.starts++
		n = j.starts
		m.startCalls[uid] = key
	})
	return n
}

// startedJob is the job of that UID that this process called Start for,
// while it remembers the job.
func (m *jobMemory) startedJob(uid types.UID) (key types.NamespacedName, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key, ok = m.startCalls[uid]
	return key, ok
}

// starts counts the Start calls made for the job.
func (m *jobMemory) starts(key types.NamespacedName, uid types.UID) (n int) {
	m.read(key, uid, func(j *jobMemo) { n = j.starts })
	return n
}

// noteSignal remembers a signal sent.
func (m *jobMemory) noteSignal(key types.NamespacedName, uid types.UID, s sentSignal) {
	m.write(key, uid, func(j *jobMemo) { j.stops = append(j.stops, s) })
}

// signals are the signals this process sent to the job.
func (m *jobMemory) signals(key types.NamespacedName, uid types.UID) (out []sentSignal) {
	m.read(key, uid, func(j *jobMemo) { out = slices.Clone(j.stops) })
	return out
}

// stopReason is the reason of the stop this process began sending
// signals for, empty if it sent none.
func (m *jobMemory) stopReason(key types.NamespacedName, uid types.UID) (reason shellv1alpha1.StopReason) {
	m.read(key, uid, func(j *jobMemo) {
		if len(j.stops) > 0 {
			reason = j.stops[0].reason
		}
	})
	return reason
}

// placed remembers when the job's placement was recorded; zero forgets
// it, once the command started.
func (m *jobMemory) placed(key types.NamespacedName, uid types.UID, at time.Time) {
	m.write(key, uid, func(j *jobMemo) { j.placedAt = at })
}

// placedAt is when this process recorded the job's placement.
func (m *jobMemory) placedAt(key types.NamespacedName, uid types.UID) (at time.Time, ok bool) {
	m.read(key, uid, func(j *jobMemo) { at = j.placedAt })
	return at, !at.IsZero()
}

// facts is what the job's worker's agent reported.
func (m *jobMemory) facts(key types.NamespacedName, uid types.UID) (f agentFacts, ok bool) {
	m.read(key, uid, func(j *jobMemo) { f, ok = j.facts, j.reported })
	return f, ok
}

// unended is the job of that name whose command this process knows runs:
// started, on a worker, with no exit reported.
func (m *jobMemory) unended(key types.NamespacedName) (uid types.UID, pod string, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	j, found := m.jobs[key]
	if !found || !j.reported || j.facts.Pod == "" || j.facts.Exited || j.facts.Unknown {
		return "", "", false
	}
	return j.uid, j.facts.Pod, true
}

// record merges an agent's event of the job into its facts and tells
// whether the reconciler should look at the job now: on its first report
// and on its exit. Status reports only refresh the counters that idle
// timeouts read.
func (m *jobMemory) record(key types.NamespacedName, pod string, ev agentapi.Event) (notify bool) {
	m.write(key, types.UID(ev.Job), func(j *jobMemo) {
		f, known := j.facts, j.reported
		if known && f.Pod != pod {
			// The job's name is its UID, so this is a stray report: keep
			// the first pod's.
			return
		}
		f.Pod = pod
		if ev.PGID != 0 {
			f.PGID = ev.PGID
		}
		f.OutputBytes = max(f.OutputBytes, ev.OutputBytes)
		f.DroppedBytes = max(f.DroppedBytes, ev.DroppedBytes)
		if ev.LastOutput != nil && ev.LastOutput.After(f.LastOutput) {
			f.LastOutput = *ev.LastOutput
		}
		notify = !known
		switch ev.Type {
		case agentapi.EventStarted:
			if f.StartedAt.IsZero() {
				f.StartedAt = ev.Time
			}
		case agentapi.EventExited:
			if !f.Exited {
				f.Exited, f.ExitCode, f.ExitedAt, f.Lost = true, ev.ExitCode, ev.Time, ev.Lost
				f.OOMKills, f.Shutdown, f.Files, f.Signals = ev.OOMKills, ev.Shutdown, ev.Files, ev.Signals
				notify = true
			}
		}
		j.facts, j.reported = f, true
	})
	return notify
}

// started records a start answered by the agent, before its stream
// reports it.
func (m *jobMemory) started(key types.NamespacedName, uid types.UID, pod string, resp agentapi.StartResponse) {
	m.write(key, uid, func(j *jobMemo) {
		f := j.facts
		if j.reported && f.Pod != pod {
			return
		}
		f.Pod, f.PGID = pod, resp.PGID
		if f.StartedAt.IsZero() {
			f.StartedAt = resp.StartedAt
		}
		j.facts, j.reported = f, true
	})
}

// unknown records that the pod's agent does not know the job, and tells
// whether that is news.
func (m *jobMemory) unknown(key types.NamespacedName, uid types.UID, pod string) (news bool) {
	m.write(key, uid, func(j *jobMemo) {
		if j.reported && (j.facts.Pod != pod || j.facts.Unknown) {
			return
		}
		j.facts.Pod, j.facts.Unknown, j.reported = pod, true, true
		news = true
	})
	return news
}
