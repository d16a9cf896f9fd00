package scheduler

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/shelljob"
)

// A Placement is the decision for a queued job as its reconcile records
// it: where Schedule put it, and the revision of that worker.
type Placement struct {
	Decision
	Revision string
}

// Queues holds the ShellJobs that wait for a worker, one queue per pool,
// first in, first out (Compare), as Kueue's queue manager holds the
// pending workloads of each ClusterQueue. The ShellJob reconciler and its
// watch put jobs in (AddOrUpdate) and take them out; the operator's
// placement takes the pools whose queue has news (Heads), decides where
// their jobs go (Schedule), and hands each job its Placement (Decide),
// which the job's reconcile records (Decision). It does no I/O, and is
// safe for concurrent use.
type Queues struct {
	mu   sync.Mutex
	cond *sync.Cond
	// jobs are the queued jobs by name; each is in its pool's queue too.
	jobs  map[types.NamespacedName]*entry
	pools map[types.NamespacedName]*poolQueue
}

// A poolQueue is the waiting jobs of one pool.
type poolQueue struct {
	jobs map[types.NamespacedName]*entry
	// news: something happened since the placement last looked at the
	// pool that may place one of its jobs.
	news bool
}

type entry struct {
	job  *shellv1alpha1.ShellJob
	view Job
	pool types.NamespacedName
	// decision is the placement's latest for the job: a current one if
	// decided, else the one before the job's last change, if made.
	decision Placement
	decided  bool
	made     bool
	// waiters counts the reconciles that wait for a decision.
	waiters int
}

// A Head is a pool whose queue has news, with its waiting jobs, oldest
// first: the first is the head of its queue. The jobs are the queue's
// own; read them only.
type Head struct {
	Pool types.NamespacedName
	Jobs []*shellv1alpha1.ShellJob
}

// NewQueues returns empty queues.
func NewQueues() *Queues {
	q := &Queues{jobs: map[types.NamespacedName]*entry{}, pools: map[types.NamespacedName]*poolQueue{}}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// PoolOf is the key of the job's pool.
func PoolOf(j *shellv1alpha1.ShellJob) types.NamespacedName {
	return types.NamespacedName{Namespace: j.Namespace, Name: shelljob.Pool(j)}
}

// AddOrUpdate puts a job that waits for a worker (Waits) in its pool's
// queue, or refreshes it there, and takes it out once it no longer waits.
// The queue keeps j: pass a copy. A job new to its queue, or one whose
// place in it changed (its mode, the worker it prefers), is news for the
// pool, and waits for a new decision; a job of the same name with another
// UID is another job, and a copy older than the one queued (by its
// resourceVersion) changes nothing. A job that leaves its queue without having recorded
// the worker it was given (it was stopped, or it ended) is news too: that
// worker is free again.
func (q *Queues) AddOrUpdate(j *shellv1alpha1.ShellJob) {
	key := types.NamespacedName{Namespace: j.Namespace, Name: j.Name}
	q.mu.Lock()
	defer q.mu.Unlock()
	old := q.jobs[key]
	if old != nil && old.job.UID != j.UID {
		q.remove(key, true)
		old = nil
	}
	if old != nil && older(j, old.job) {
		return
	}
	if !Waits(j) {
		if old != nil {
			q.remove(key, !shelljob.IsAssigned(j))
		}
		return
	}
	view := JobOf(j)
	if old != nil {
		old.job = j
		if old.view != view {
			old.view, old.decided = view, false
			q.pools[old.pool].news = true
			q.cond.Broadcast()
		}
		return
	}
	e := &entry{job: j, view: view, pool: PoolOf(j)}
	p := q.pools[e.pool]
	if p == nil {
		p = &poolQueue{jobs: map[types.NamespacedName]*entry{}}
		q.pools[e.pool] = p
	}
	p.jobs[key] = e
	p.news = true
	q.jobs[key] = e
	q.cond.Broadcast()
}

// Delete takes the job of that name out of its queue: it is gone.
func (q *Queues) Delete(key types.NamespacedName) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.remove(key, true)
}

// remove takes a job out of its queue. If freed and the job was given a
// worker, the pool has news.
func (q *Queues) remove(key types.NamespacedName, freed bool) {
	e, ok := q.jobs[key]
	if !ok {
		return
	}
	delete(q.jobs, key)
	p := q.pools[e.pool]
	delete(p.jobs, key)
	if freed && e.decided && e.decision.Pod != "" {
		p.news = true
	}
	if len(p.jobs) == 0 {
		delete(q.pools, e.pool)
	}
	// Wakes the reconciles that wait for its decision.
	q.cond.Broadcast()
}

// Wake is news for the pool: a worker may be free, or the pool changed.
func (q *Queues) Wake(pool types.NamespacedName) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if p := q.pools[pool]; p != nil {
		p.news = true
		q.cond.Broadcast()
	}
}

// WakeAll is news for every pool that has waiting jobs.
func (q *Queues) WakeAll() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, p := range q.pools {
		p.news = true
	}
	q.cond.Broadcast()
}

// Heads blocks until some pool's queue has news, then returns each such
// pool with its waiting jobs and clears its news. It returns nil once ctx
// is done.
func (q *Queues) Heads(ctx context.Context) []Head {
	defer context.AfterFunc(ctx, q.broadcast)()
	q.mu.Lock()
	defer q.mu.Unlock()
	for {
		if ctx.Err() != nil {
			return nil
		}
		var heads []Head
		for key, p := range q.pools {
			if !p.news {
				continue
			}
			p.news = false
			entries := make([]*entry, 0, len(p.jobs))
			for _, e := range p.jobs {
				entries = append(entries, e)
			}
			slices.SortFunc(entries, func(a, b *entry) int { return Compare(a.view, b.view) })
			h := Head{Pool: key, Jobs: make([]*shellv1alpha1.ShellJob, len(entries))}
			for i, e := range entries {
				h.Jobs[i] = e.job
			}
			heads = append(heads, h)
		}
		if len(heads) > 0 {
			slices.SortFunc(heads, func(a, b Head) int {
				return cmp.Or(cmp.Compare(a.Pool.Namespace, b.Pool.Namespace), cmp.Compare(a.Pool.Name, b.Pool.Name))
			})
			return heads
		}
		q.cond.Wait()
	}
}

// Decide records p as the decision for the queued job j. It tells whether
// the job's reconcile needs telling: the decision is news, and no
// reconcile of the job waits for it (Decision). A job no longer queued
// needs nothing.
func (q *Queues) Decide(j *shellv1alpha1.ShellJob, p Placement) (tell bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	e, ok := q.jobs[types.NamespacedName{Namespace: j.Namespace, Name: j.Name}]
	if !ok || e.job.UID != j.UID {
		return false
	}
	news := !e.made || e.decision != p
	e.decision, e.decided, e.made = p, true, true
	if e.waiters > 0 {
		q.cond.Broadcast()
		return false
	}
	return news
}

// Decision returns the latest decision for the queued job j, waiting until
// there is one, the job leaves its queue, or ctx is done; false without
// one.
func (q *Queues) Decision(ctx context.Context, j *shellv1alpha1.ShellJob) (Placement, bool) {
	defer context.AfterFunc(ctx, q.broadcast)()
	key := types.NamespacedName{Namespace: j.Namespace, Name: j.Name}
	q.mu.Lock()
	defer q.mu.Unlock()
	e := q.jobs[key]
	if e == nil || e.job.UID != j.UID {
		return Placement{}, false
	}
	e.waiters++
	defer func() { e.waiters-- }()
	for !e.decided && q.jobs[key] == e && ctx.Err() == nil {
		q.cond.Wait()
	}
	return e.decision, e.decided
}

// Len counts the queued jobs.
func (q *Queues) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.jobs)
}

// older tells whether a is an older version of b. A version that does
// not parse is taken as fresh.
func older(a, b *shellv1alpha1.ShellJob) bool {
	c, err := resourceversion.CompareResourceVersion(a.ResourceVersion, b.ResourceVersion)
	return err == nil && c < 0
}

func (q *Queues) broadcast() {
	q.mu.Lock()
	q.cond.Broadcast()
	q.mu.Unlock()
}
