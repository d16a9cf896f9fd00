package controllers

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/scheduler"
)

const (
	// placementRecheck is how often the placement looks at every pool
	// with waiting jobs even when no event says a worker was freed: a
	// cheap guard against a missed event.
	placementRecheck = 30 * time.Second
	// placementRetry is how soon a pool whose look failed (a cache read)
	// is looked at again.
	placementRetry = time.Second
	// decisionWait bounds how long a job's reconcile waits for the
	// placement's decision; the placement takes a few milliseconds. A
	// decision that comes later brings a pass of its own.
	decisionWait = 5 * time.Second
)

// placer is the operator's scheduler, a manager Runnable as Kueue's is. The
// ShellJob reconciler and its watch put the jobs that wait for a worker in
// their pool's queue (scheduler.Queues); the placer takes the pools whose
// queue has news (Heads), snapshots each pool's workers and jobs from the
// cache, asks internal/scheduler where the waiting jobs go (Schedule),
// assumes each placement until the cache shows it, and hands every job its
// decision. The job's reconcile records it, in the status write of its
// pass: the reconcile that waits for it (decision), or one the placer asks
// for when the decision is news. The placer runs on the leader only, in
// one goroutine, so placements are made, and their Scheduled Events told,
// in the order of the queue.
type placer struct {
	cache client.Reader
	// poolJobs lists each pool's unfinished jobs.
	poolJobs *PoolIndex
	queues   *scheduler.Queues
	assumed  *assumptions
	// workers are the agents' own states: a worker whose spool is full
	// gets no job.
	workers  *workerStates
	recorder events.EventRecorder
	// notify brings a pass over a job whose decision is news.
	notify chan<- event.TypedGenericEvent[*shellv1alpha1.ShellJob]
	clock  clock.WithTicker
	log    logr.Logger

	// The pools' revisions and whether their workers may run, as the
	// pool reconciler has them.
	workerNamespace string
	workerImage     string
	workerSecurity  WorkerSecurity
	serviceAccounts ServiceAccountPolicy
}

// NeedLeaderElection makes the placement run on the leader only, beside the
// reconcilers.
func (p *placer) NeedLeaderElection() bool { return true }

// Start places jobs until ctx ends.
func (p *placer) Start(ctx context.Context) error {
	go p.recheck(ctx)
	for {
		heads := p.queues.Heads(ctx)
		if heads == nil {
			return nil
		}
		for _, h := range heads {
			if err := p.schedule(ctx, h); err != nil {
				p.log.Error(err, "Place the waiting jobs of a pool", "pool", h.Pool)
				go func() {
					select {
					case <-ctx.Done():
					case <-p.clock.After(placementRetry):
						p.queues.Wake(h.Pool)
					}
				}()
			}
		}
	}
}

// recheck wakes every pool with waiting jobs each placementRecheck.
func (p *placer) recheck(ctx context.Context) {
	t := p.clock.NewTicker(placementRecheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			p.queues.WakeAll()
		}
	}
}

// decided is a decision for one job.
type decided struct {
	job *shellv1alpha1.ShellJob
	scheduler.Placement
}

// schedule decides where the waiting jobs of one pool go: (1) the pool and
// whether its workers may run, (2) a snapshot of its workers and of its
// unfinished jobs, the placements assumed included, (3) the scheduler's
// decisions, in FIFO order, (4) the assumptions and Events of the
// placements, under the pool's lock, then (5) each decision to its job.
func (p *placer) schedule(ctx context.Context, h scheduler.Head) error {
	pool := &shellv1alpha1.ShellPool{}
	if err := p.cache.Get(ctx, h.Pool, pool); err != nil {
		if !apierrors.IsNotFound(err) {
			return err
		}
		// Its creation is news.
		p.decideAll(ctx, h.Jobs, shellv1alpha1.ShellJobScheduledReasonPoolNotFound, fmt.Sprintf("pool %s not found", h.Pool.Name))
		return nil
	}
	workerNS := workerNamespace(p.workerNamespace, pool.Namespace)
	if why := p.serviceAccounts.Refusal(pool, workerNS); why != "" {
		// The pool's next change is news, as is the operator's restart
		// with another list.
		p.decideAll(ctx, h.Jobs, shellv1alpha1.ShellJobScheduledReasonServiceAccountNotAllowed, fmt.Sprintf("pool %s: %s", pool.Name, why))
		return nil
	}

	var pods corev1.PodList
	if err := p.cache.List(ctx, &pods, client.InNamespace(workerNS), workerLabels(pool)); err != nil {
		return err
	}
	jobs, err := p.poolJobs.jobsOfPool(pool.Namespace, pool.Name)
	if err != nil {
		return err
	}
	workers := make([]scheduler.Worker, 0, len(pods.Items))
	revisions := map[string]string{}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if !ownedBy(pod, pool) {
			continue
		}
		revisions[pod.Name] = pod.Labels[shellv1alpha1.LabelRevision]
		workers = append(workers, scheduler.Worker{
			Name:      pod.Name,
			Index:     workerIndex(pod),
			Revision:  pod.Labels[shellv1alpha1.LabelRevision],
			Ready:     podReady(pod) && pod.DeletionTimestamp == nil && pod.Status.Phase == corev1.PodRunning,
			SpoolFull: p.workers.spoolFull(client.ObjectKeyFromObject(pod)),
		})
	}
	queued := make(map[types.UID]bool, len(h.Jobs))
	for _, j := range h.Jobs {
		queued[j.UID] = true
	}

	var out []decided
	func() {
		assumed, unlock := p.assumed.lock(h.Pool)
		defer unlock()
		byName := make(map[string]*shellv1alpha1.ShellJob, len(jobs))
		snapshot := make([]scheduler.Job, 0, len(jobs))
		for i, sj := range assumed.snapshot(jobs) {
			j := jobs[i]
			if !queued[j.UID] && sj.Pod == "" {
				// Waiting, but not queued yet: its watch event is news.
				continue
			}
			byName[j.Name] = j
			snapshot = append(snapshot, sj)
			if a, ok := assumed.assumed(j.UID); ok && queued[j.UID] {
				// Placed by an earlier look, its placement stands.
				out = append(out, decided{j, a})
			}
		}
		rev := Revision(pool, p.workerImage, p.workerSecurity)
		for _, a := range scheduler.Schedule(schedulerPool(pool, rev), workers, snapshot) {
			j := byName[a.Job]
			d := scheduler.Placement{Decision: a.Decision}
			if a.Pod != "" {
				d.Revision = revisions[a.Pod]
				assumed.assume(j.UID, d)
				p.recorder.Eventf(j, nil, corev1.EventTypeNormal, "Scheduled", "Schedule", "%s", a.Message)
			}
			out = append(out, decided{j, d})
		}
	}()
	for _, d := range out {
		p.decide(ctx, d.job, d.Placement)
	}
	return nil
}

// schedulerPool is what the scheduler needs of a pool of revision rev.
func schedulerPool(pool *shellv1alpha1.ShellPool, rev string) scheduler.Pool {
	return scheduler.Pool{
		Name:              pool.Name,
		Revision:          rev,
		Replicas:          pool.Spec.Replicas,
		StatefulWorker:    pool.Spec.StatefulWorker,
		MaxRunningPerUser: ptr.Deref(pool.Spec.MaxRunningPerUser, 0),
		Approval:          pool.Spec.Approval != nil,
	}
}

// decideAll gives every job of a pool that cannot place any the same
// decision to wait.
func (p *placer) decideAll(ctx context.Context, jobs []*shellv1alpha1.ShellJob, reason, msg string) {
	for _, j := range jobs {
		p.decide(ctx, j, scheduler.Placement{Decision: scheduler.Decision{Reason: reason, Message: msg}})
	}
}

// decide hands a job its decision, and asks for a pass over it when the
// decision is news that no pass waits for. A job with no number yet has
// its first pass to come, which records the decision with the number, in
// one status write.
func (p *placer) decide(ctx context.Context, j *shellv1alpha1.ShellJob, d scheduler.Placement) {
	if !p.queues.Decide(j, d) || j.Status.Number == 0 {
		return
	}
	select {
	case p.notify <- event.TypedGenericEvent[*shellv1alpha1.ShellJob]{Object: j}:
	case <-ctx.Done():
	}
}

// decision waits, up to decisionWait, for the placement's decision for a
// job its reconcile queued; false if none came.
func (p *placer) decision(ctx context.Context, job *shellv1alpha1.ShellJob) (scheduler.Placement, bool) {
	ctx, cancel := context.WithTimeout(ctx, decisionWait)
	defer cancel()
	return p.queues.Decision(ctx, job)
}
