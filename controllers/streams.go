package controllers

import (
	"context"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/shelljob"
)

const (
	// streamResync is how often the streams are matched to the worker pods
	// when nothing kicks them sooner.
	streamResync = 2 * time.Second
	// streamBackoffMin and streamBackoffMax bound the wait before a broken
	// events stream is opened again.
	streamBackoffMin = 250 * time.Millisecond
	streamBackoffMax = 10 * time.Second
)

// agentFacts is what a worker's agent reported of one job.
type agentFacts struct {
	// Job is the job's key, for forgetting it once it is deleted.
	Job       types.NamespacedName
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
}

// factStore holds the agents' reports by job UID, for the ShellJob
// reconciler. The streams write it; the reconciler reads it and forgets a
// job once its end is recorded or it is deleted.
type factStore struct {
	mu    sync.Mutex
	facts map[types.UID]agentFacts
}

func newFactStore() *factStore { return &factStore{facts: map[types.UID]agentFacts{}} }

// record merges an event and tells whether the reconciler should look at
// the job now: on its first report and on its exit. Status reports only
// refresh the counters that idle timeouts read.
func (s *factStore) record(job types.NamespacedName, pod string, ev agentapi.Event) bool {
	uid := types.UID(ev.Job)
	s.mu.Lock()
	defer s.mu.Unlock()
	f, known := s.facts[uid]
	if known && f.Pod != pod {
		// The job's name is its UID, so this is a stray report: keep the
		// first pod's.
		return false
	}
	f.Job, f.Pod = job, pod
	if ev.PGID != 0 {
		f.PGID = ev.PGID
	}
	f.OutputBytes = max(f.OutputBytes, ev.OutputBytes)
	f.DroppedBytes = max(f.DroppedBytes, ev.DroppedBytes)
	if ev.LastOutput != nil && ev.LastOutput.After(f.LastOutput) {
		f.LastOutput = *ev.LastOutput
	}
	notify := !known
	switch ev.Type {
	case agentapi.EventStarted:
		if f.StartedAt.IsZero() {
			f.StartedAt = ev.Time
		}
	case agentapi.EventExited:
		if !f.Exited {
			f.Exited, f.ExitCode, f.ExitedAt, f.Lost = true, ev.ExitCode, ev.Time, ev.Lost
			f.OOMKills, f.Shutdown, f.Files = ev.OOMKills, ev.Shutdown, ev.Files
			notify = true
		}
	}
	s.facts[uid] = f
	return notify
}

// get returns what is known of a job.
func (s *factStore) get(uid types.UID) (agentFacts, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.facts[uid]
	return f, ok
}

// started records a start answered by the agent, before its stream
// reports it.
func (s *factStore) started(job types.NamespacedName, uid types.UID, pod string, resp agentapi.StartResponse) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.facts[uid]
	if ok && f.Pod != pod {
		return
	}
	f.Job, f.Pod, f.PGID = job, pod, resp.PGID
	if f.StartedAt.IsZero() {
		f.StartedAt = resp.StartedAt
	}
	s.facts[uid] = f
}

// unknown records that the pod's agent does not know the job, and tells
// whether that is news.
func (s *factStore) unknown(job types.NamespacedName, uid types.UID, pod string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.facts[uid]
	if ok && (f.Pod != pod || f.Unknown) {
		return false
	}
	f.Job, f.Pod, f.Unknown = job, pod, true
	s.facts[uid] = f
	return true
}

func (s *factStore) forget(uid types.UID) {
	s.mu.Lock()
	delete(s.facts, uid)
	s.mu.Unlock()
}

// forgetJob forgets every job of that key. The store holds unfinished jobs
// only, so the scan is short.
func (s *factStore) forgetJob(job types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for uid, f := range s.facts {
		if f.Job == job {
			delete(s.facts, uid)
		}
	}
}

// workerStreams keeps one agent events stream open per ready worker pod,
// whatever its revision, for as long as the pod runs. The design asks for
// one long-lived stream per pod rather than one per job, so that many jobs
// stay cheap. The agent starts each stream with the state of every job it
// knows, so a restarted operator learns the exits it missed.
//
// Reports go into the fact store, and the jobs they concern are sent on
// notify, a source.Channel of the ShellJob controller. workerStreams is a
// manager Runnable that runs on the leader only.
type workerStreams struct {
	agent agentapi.Client
	cache client.Reader
	facts *factStore
	// workers, if set, gets each worker's own state (EventWorker).
	workers *workerStates
	notify  chan<- event.TypedGenericEvent[*shellv1alpha1.ShellJob]
	clock   clock.WithTicker
	log     logr.Logger

	kicks chan struct{}

	mu      sync.Mutex
	streams map[types.UID]context.CancelFunc
}

func newWorkerStreams(agent agentapi.Client, cache client.Reader, facts *factStore,
	notify chan<- event.TypedGenericEvent[*shellv1alpha1.ShellJob], clk clock.WithTicker, log logr.Logger) *workerStreams {
	return &workerStreams{
		agent: agent, cache: cache, facts: facts, notify: notify, clock: clk, log: log,
		kicks:   make(chan struct{}, 1),
		streams: map[types.UID]context.CancelFunc{},
	}
}

// NeedLeaderElection makes the streams run on the leader only: only the
// leader acts on what they report.
func (s *workerStreams) NeedLeaderElection() bool { return true }

// Kick asks for the streams to be matched to the pods now, as after a pool
// reconcile. It never blocks.
func (s *workerStreams) Kick() {
	select {
	case s.kicks <- struct{}{}:
	default:
	}
}

// Start runs until ctx ends.
func (s *workerStreams) Start(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	t := s.clock.NewTicker(streamResync)
	defer t.Stop()
	for {
		if err := s.sync(ctx, &wg); err != nil {
			s.log.Error(err, "Match event streams to worker pods")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		case <-s.kicks:
		}
	}
}

// sync opens a stream for each running, ready worker pod and closes those
// of pods that are gone or being deleted.
func (s *workerStreams) sync(ctx context.Context, wg *sync.WaitGroup) error {
	var pods corev1.PodList
	if err := s.cache.List(ctx, &pods, client.HasLabels{shellv1alpha1.LabelPool}); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	keep := map[types.UID]bool{}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning {
			continue
		}
		if _, open := s.streams[pod.UID]; !open && !podReady(pod) {
			continue
		}
		keep[pod.UID] = true
		if _, open := s.streams[pod.UID]; open {
			continue
		}
		pool, ok := poolOf(pod)
		if !ok {
			continue
		}
		sctx, cancel := context.WithCancel(ctx)
		s.streams[pod.UID] = cancel
		w := worker{pod: types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, jobs: pool.Namespace, pool: pool}
		wg.Go(func() { s.run(sctx, w) })
	}
	for uid, cancel := range s.streams {
		if !keep[uid] {
			cancel()
			delete(s.streams, uid)
		}
	}
	return nil
}

// worker is a worker pod, the namespace of its pool and jobs, and its
// pool.
type worker struct {
	pod  types.NamespacedName
	jobs string
	pool types.NamespacedName
}

// run keeps one pod's stream open until ctx ends.
func (s *workerStreams) run(ctx context.Context, w worker) {
	pod := w.pod
	log := s.log.WithValues("pod", pod)
	if s.workers != nil {
		defer s.workers.forget(pod)
	}
	backoff := streamBackoffMin
	for {
		opened := s.clock.Now()
		replayed := map[string]bool{}
		synced := false
		err := s.agent.Events(ctx, pod, func(ev agentapi.Event) {
			switch {
			case ev.Type == agentapi.EventSynced:
				synced = true
				s.synced(ctx, w, opened, replayed)
			case !synced:
				replayed[ev.Job] = true
				s.handle(ctx, w, ev)
			default:
				s.handle(ctx, w, ev)
			}
		})
		if ctx.Err() != nil {
			return
		}
		if s.clock.Since(opened) > streamBackoffMax {
			backoff = streamBackoffMin
		}
		log.V(1).Info("Events stream ended; opening it again", "err", err, "after", backoff)
		select {
		case <-ctx.Done():
			return
		case <-s.clock.After(backoff):
		}
		backoff = min(2*backoff, streamBackoffMax)
	}
}

// handle records one event of an unfinished job and wakes its reconcile,
// or the worker's own state.
func (s *workerStreams) handle(ctx context.Context, w worker, ev agentapi.Event) {
	if ev.Type == agentapi.EventWorker {
		if ev.Worker != nil && s.workers != nil {
			s.workers.set(w.pod, w.pool, *ev.Worker)
		}
		return
	}
	job, err := s.job(ctx, w.jobs, ev.Job)
	if err != nil {
		s.log.Error(err, "Find the job of an agent event", "pod", w.pod, "job", ev.Job)
		return
	}
	if job == nil || shelljob.IsFinished(job) {
		// A job deleted since, or one whose end is recorded: the agent
		// replays every job its spool still holds.
		return
	}
	notify := s.facts.record(client.ObjectKeyFromObject(job), w.pod.Name, ev)
	// A deletion that the cache took in between found nothing to forget:
	// look again now that the report is in.
	if again, err := s.job(ctx, w.jobs, ev.Job); err == nil && again == nil {
		s.facts.forget(types.UID(ev.Job))
		return
	}
	if notify {
		s.send(ctx, job)
	}
}

// job finds a job by UID in the cache, nil if there is none.
func (s *workerStreams) job(ctx context.Context, ns, uid string) (*shellv1alpha1.ShellJob, error) {
	var list shellv1alpha1.ShellJobList
	if err := s.cache.List(ctx, &list, client.InNamespace(ns), client.MatchingFields{indexJobUID: uid}); err != nil {
		return nil, err
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	return &list.Items[0], nil
}

// wakeQueued wakes the reconciles of the pool's jobs that wait for a
// worker: one may have room again.
func (s *workerStreams) wakeQueued(ctx context.Context, pool types.NamespacedName) {
	jobs, err := jobsOfPool(ctx, s.cache, pool.Namespace, pool.Name)
	if err != nil {
		s.log.Error(err, "List the jobs of a pool", "pool", pool)
		return
	}
	for i := range jobs {
		if jobs[i].Status.Pod == "" {
			s.send(ctx, &jobs[i])
		}
	}
}

// send wakes the job's reconcile.
func (s *workerStreams) send(ctx context.Context, job *shellv1alpha1.ShellJob) {
	select {
	case s.notify <- event.TypedGenericEvent[*shellv1alpha1.ShellJob]{Object: job}:
	case <-ctx.Done():
	}
}

// synced looks, once the agent has replayed every job it knows, for the
// jobs recorded as started on the pod before the stream opened that it did
// not name: their spool is gone, and they will never report an exit.
func (s *workerStreams) synced(ctx context.Context, w worker, opened time.Time, replayed map[string]bool) {
	jobs, err := jobsOnPod(ctx, s.cache, w.jobs, w.pod.Name)
	if err != nil {
		s.log.Error(err, "List the jobs of a worker", "pod", w.pod)
		return
	}
	for i := range jobs {
		j := &jobs[i]
		if !j.Status.Ran || replayed[string(j.UID)] || j.Status.StartTime == nil || !j.Status.StartTime.Time.Before(opened) {
			continue
		}
		if s.facts.unknown(client.ObjectKeyFromObject(j), j.UID, w.pod.Name) {
			s.send(ctx, j)
		}
	}
}

// podReady tells whether a pod's Ready condition is True.
func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
