package controllers

import (
	"context"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// workerStreams keeps one agent events stream open per ready worker pod,
// whatever its revision, for as long as the pod runs. The design asks for
// one long-lived stream per pod rather than one per job, so that many jobs
// stay cheap. The agent starts each stream with the state of every job it
// knows, so a restarted operator learns the exits it missed.
//
// Reports go into the jobs' memory, and the jobs they concern are sent on
// notify, a source.Channel of the ShellJob controller. workerStreams is a
// manager Runnable that runs on the leader only.
type workerStreams struct {
	agent agentapi.Client
	cache client.Reader
	// memory takes the agents' reports of the jobs.
	memory *jobMemory
	// workers, if set, gets each worker's own state (EventWorker).
	workers *workerStates
	notify  chan<- event.TypedGenericEvent[*shellv1alpha1.ShellJob]
	clock   clock.WithTicker
	log     logr.Logger

	kicks chan struct{}

	mu      sync.Mutex
	streams map[types.UID]context.CancelFunc
}

func newWorkerStreams(agent agentapi.Client, cache client.Reader, memory *jobMemory,
	notify chan<- event.TypedGenericEvent[*shellv1alpha1.ShellJob], clk clock.WithTicker, log logr.Logger) *workerStreams {
	return &workerStreams{
		agent: agent, cache: cache, memory: memory, notify: notify, clock: clk, log: log,
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
	if job == nil {
		s.justStarted(ctx, w, ev)
		return
	}
	if shelljob.IsFinished(job) {
		// Its end is recorded: the agent replays every job its spool
		// still holds.
		return
	}
	key := client.ObjectKeyFromObject(job)
	notify := s.memory.record(key, w.pod.Name, ev)
	// A deletion or an end that the cache took in between found nothing
	// to forget: look again now that the report is in (the index holds
	// unfinished jobs alone).
	if again, err := s.job(ctx, w.jobs, ev.Job); err == nil && again == nil {
		s.memory.forget(key, types.UID(ev.Job))
		return
	}
	if notify {
		s.send(ctx, job)
	}
}

// justStarted records the event of a job that the cache does not show on
// a worker, if this process started it and remembers it: the pass that
// recorded its placement started it at once, and a quick command's exit
// can come before the placement's watch event. Any other is a job
// deleted since, or one whose end is recorded and forgotten.
func (s *workerStreams) justStarted(ctx context.Context, w worker, ev agentapi.Event) {
	key, ok := s.memory.startedJob(types.UID(ev.Job))
	if !ok || key.Namespace != w.jobs {
		return
	}
	if s.memory.record(key, w.pod.Name, ev) {
		s.send(ctx, &shellv1alpha1.ShellJob{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})
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
		if s.memory.unknown(client.ObjectKeyFromObject(j), j.UID, w.pod.Name) {
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
