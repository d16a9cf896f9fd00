package scheduler

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/texts"
)

// Pool is what placement needs of a ShellPool.
type Pool struct {
	// Revision is the current revision; only its workers take new jobs.
	Revision string
	// Replicas is the pool's size; workers at this index or above are on
	// their way out.
	Replicas int32
	// StatefulWorker is the index of the worker that runs Stateful jobs.
	StatefulWorker int32
	// Name is the pool's name, for messages.
	Name string
	// MaxRunningPerUser caps the jobs of one user that hold workers at
	// once; 0 for no cap.
	MaxRunningPerUser int32
	// Approval: its jobs wait until approved.
	Approval bool
}

// Worker is one worker pod.
type Worker struct {
	Name     string
	Index    int32
	Revision string
	// Ready is true when the pod is ready and not being deleted.
	Ready bool
	// SpoolFull is true when the worker's agent said its spool has no
	// room for another job's output: it takes none.
	SpoolFull bool
}

// Job is one unfinished job of the pool.
type Job struct {
	// Name identifies the job in its namespace.
	Name    string
	Mode    shellv1alpha1.ShellJobMode
	Created time.Time
	// Pod is the worker the job holds, "" while it is queued.
	Pod string
	// Stopping jobs that hold no worker are never placed: they are about
	// to be stopped before they run.
	Stopping bool
	// Preferred is the worker the job's client would like, "" for none.
	Preferred string
	// User is the job's user (its origin's), whose jobs the pool's
	// MaxRunningPerUser counts.
	User string
	// Approved: someone approved the job, which a pool that requires
	// approval waits for.
	Approved bool
}

// Decision is where a job goes.
type Decision struct {
	// Pod is the chosen worker, "" when the job waits.
	Pod string
	// Reason is a ShellJobScheduledReason constant.
	Reason string
	// Message says why, for the Scheduled condition.
	Message string
}

// Load is what runs on one worker.
type Load struct {
	// Jobs counts every job that holds the worker.
	Jobs int
	// Seated is true when a Fork, Console or Stateful job holds it.
	Seated bool
}

// Loads counts the jobs that hold each worker, by worker name.
func Loads(jobs []Job) map[string]Load {
	loads := map[string]Load{}
	for _, j := range jobs {
		if j.Pod == "" {
			continue
		}
		l := loads[j.Pod]
		l.Jobs++
		if j.Mode != shellv1alpha1.ModeDirect {
			l.Seated = true
		}
		loads[j.Pod] = l
	}
	return loads
}

// Less orders jobs first in, first out: by creation time, then by name.
func Less(a, b Job) bool { return Compare(a, b) < 0 }

// Compare is Less as slices.SortFunc takes it.
func Compare(a, b Job) int {
	return cmp.Or(a.Created.Compare(b.Created), cmp.Compare(a.Name, b.Name))
}

// Assignment is the decision for one queued job.
type Assignment struct {
	// Job is the job's name.
	Job string
	Decision
}

// Schedule decides, in FIFO order, where each queued job of jobs goes:
// those that hold no worker and are not stopping. Jobs that hold a worker
// count as its load, and as their users' running jobs; each placement adds
// to both. A job that waits says why. The result is in FIFO order.
//
// Before any worker is looked for, a job of a pool that requires approval
// waits until it is approved, and a job whose user already holds
// MaxRunningPerUser workers of the pool waits for one of them to end: it
// takes nothing, so the jobs of other users behind it are placed past it,
// and the user's own later jobs wait behind it.
func Schedule(pool Pool, workers []Worker, jobs []Job) []Assignment {
	eligible := make([]Worker, 0, len(workers))
	var full []string
	for _, w := range workers {
		if w.Ready && w.Revision == pool.Revision && w.Index >= 0 && w.Index < pool.Replicas {
			if w.SpoolFull {
				full = append(full, w.Name)
				continue
			}
			eligible = append(eligible, w)
		}
	}
	queue := make([]Job, 0, len(jobs))
	running := map[string]int32{}
	for _, j := range jobs {
		switch {
		case j.Pod != "":
			running[j.User]++
		case !j.Stopping:
			queue = append(queue, j)
		}
	}
	slices.SortFunc(queue, Compare)
	out := make([]Assignment, 0, len(queue))
	loads := Loads(jobs)
	for _, q := range queue {
		if d, held := gate(q, pool, running); held {
			out = append(out, Assignment{Job: q.Name, Decision: d})
			continue
		}
		if len(eligible) == 0 {
			d := Decision{
				Reason:  shellv1alpha1.ShellJobScheduledReasonNoReadyWorker,
				Message: fmt.Sprintf("no ready worker of revision %s yet", pool.Revision),
			}
			if len(full) > 0 {
				d = spoolFull(full)
			}
			out = append(out, Assignment{Job: q.Name, Decision: d})
			continue
		}
		var (
			w  Worker
			ok bool
		)
		mode := placedAs(q.Mode)
		if mode == shellv1alpha1.ModeDirect {
			w = slices.MinFunc(eligible, func(a, b Worker) int {
				return cmp.Or(cmp.Compare(loads[a.Name].Jobs, loads[b.Name].Jobs), cmp.Compare(a.Index, b.Index))
			})
			ok = true
		} else if w, ok = preferred(q, mode, pool, eligible, loads); !ok {
			w, ok = pick(mode, pool, eligible, loads)
		}
		if !ok {
			d := waiting(mode, pool)
			if mode == shellv1alpha1.ModeStateful && slices.Contains(full, statefulName(workers, pool)) ||
				mode == shellv1alpha1.ModeFork && len(full) > 0 {
				d = spoolFull(full)
			}
			out = append(out, Assignment{Job: q.Name, Decision: d})
			continue
		}
		out = append(out, Assignment{Job: q.Name, Decision: assigned(w, loads[w.Name])})
		l := loads[w.Name]
		l.Jobs++
		if mode != shellv1alpha1.ModeDirect {
			l.Seated = true
		}
		loads[w.Name] = l
		running[q.User]++
	}
	return out
}

// gate holds a queued job back, whatever the workers, until it is approved
// (on a pool that requires approval) and its user holds fewer workers of
// the pool than MaxRunningPerUser.
func gate(q Job, pool Pool, running map[string]int32) (Decision, bool) {
	switch n := running[q.User]; {
	case pool.Approval && !q.Approved:
		return Decision{
			Reason:  shellv1alpha1.ShellJobScheduledReasonAwaitingApproval,
			Message: fmt.Sprintf("waiting for approval: pool %s runs a job once someone other than its author approves it", pool.Name),
		}, true
	case pool.MaxRunningPerUser > 0 && n >= pool.MaxRunningPerUser:
		return Decision{
			Reason:  shellv1alpha1.ShellJobScheduledReasonMaxRunningPerUser,
			Message: texts.MaxRunningPerUser(q.User, n, pool.MaxRunningPerUser, pool.Name),
		}, true
	}
	return Decision{}, false
}

// Place decides where job goes, given every unfinished job of its pool
// (job among them or not) and the pool's workers: its assignment in
// Schedule. So job gets a worker only when every queued job ahead of it
// gets one, or waits for a different one; Direct jobs never wait for a
// free worker.
func Place(job Job, pool Pool, workers []Worker, jobs []Job) Decision {
	job.Pod, job.Stopping = "", false
	all := slices.DeleteFunc(slices.Clone(jobs), func(j Job) bool { return j.Name == job.Name })
	for _, a := range Schedule(pool, workers, append(all, job)) {
		if a.Job == job.Name {
			return a.Decision
		}
	}
	panic("unreachable: job is in its own queue")
}

// placedAs is the mode a job of mode is placed as: a Console as a Fork
// job, on a free worker of its own; an unset mode is Fork.
func placedAs(mode shellv1alpha1.ShellJobMode) shellv1alpha1.ShellJobMode {
	if mode == "" || mode == shellv1alpha1.ModeConsole {
		return shellv1alpha1.ModeFork
	}
	return mode
}

// pick chooses a free worker for a Fork or Stateful job.
func pick(mode shellv1alpha1.ShellJobMode, pool Pool, eligible []Worker, loads map[string]Load) (Worker, bool) {
	var best Worker
	found := false
	for _, w := range eligible {
		if loads[w.Name].Seated {
			continue
		}
		if mode == shellv1alpha1.ModeStateful {
			if w.Index == pool.StatefulWorker {
				return w, true
			}
			continue
		}
		if !found || betterFork(w, best, pool, loads) {
			best, found = w, true
		}
	}
	return best, found
}

// preferred returns the worker a Fork job (or a Console, placed as one)
// prefers, if it is eligible, free and not the stateful worker, which Fork
// takes last.
func preferred(q Job, mode shellv1alpha1.ShellJobMode, pool Pool, eligible []Worker, loads map[string]Load) (Worker, bool) {
	if q.Preferred == "" || mode != shellv1alpha1.ModeFork {
		return Worker{}, false
	}
	i := slices.IndexFunc(eligible, func(w Worker) bool { return w.Name == q.Preferred })
	if i < 0 || loads[eligible[i].Name].Seated || eligible[i].Index == pool.StatefulWorker {
		return Worker{}, false
	}
	return eligible[i], true
}

// betterFork prefers a worker that is not the stateful one, then the least
// loaded, then the lowest index.
func betterFork(a, b Worker, pool Pool, loads map[string]Load) bool {
	as, bs := a.Index == pool.StatefulWorker, b.Index == pool.StatefulWorker
	if as != bs {
		return bs
	}
	return cmp.Or(cmp.Compare(loads[a.Name].Jobs, loads[b.Name].Jobs), cmp.Compare(a.Index, b.Index)) < 0
}

func assigned(w Worker, l Load) Decision {
	msg := fmt.Sprintf("assigned to worker %s", w.Name)
	if l.Jobs > 0 {
		msg = fmt.Sprintf("assigned to worker %s, which runs %d other job(s)", w.Name, l.Jobs)
	}
	return Decision{Pod: w.Name, Reason: shellv1alpha1.ShellJobScheduledReasonAssigned, Message: msg}
}

// spoolFull is the decision of a job that waits while the workers full
// take nothing.
func spoolFull(full []string) Decision {
	return Decision{
		Reason: shellv1alpha1.ShellJobScheduledReasonSpoolFull,
		Message: fmt.Sprintf("waiting for a worker with room: the spools of %s are full of output not delivered yet, and take no new job until some is",
			strings.Join(full, ", ")),
	}
}

// statefulName is the name of the pool's stateful worker, "" if none is
// of the current revision.
func statefulName(workers []Worker, pool Pool) string {
	for _, w := range workers {
		if w.Index == pool.StatefulWorker && w.Revision == pool.Revision {
			return w.Name
		}
	}
	return ""
}

func waiting(mode shellv1alpha1.ShellJobMode, pool Pool) Decision {
	if mode == shellv1alpha1.ModeStateful {
		return Decision{
			Reason:  shellv1alpha1.ShellJobScheduledReasonStatefulWorkerBusy,
			Message: fmt.Sprintf("waiting for the stateful worker %d", pool.StatefulWorker),
		}
	}
	return Decision{
		Reason:  shellv1alpha1.ShellJobScheduledReasonNoIdleWorker,
		Message: "waiting for a free worker",
	}
}
