package controllers

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/scheduler"
)

// assumptions remember placements that the cache may not show yet, as
// Kueue's cache assumes the workloads it admits. The placement (placer)
// assumes a job's placement before the job's reconcile records it in the
// status; the entry goes once the cache shows that pod, or the job
// finished or went away. Without it, two placements a few milliseconds
// apart could seat two jobs on one worker, or the pool reconciler could
// retire a worker that a job was just given.
//
// Every pool has a lock of its own: a placement holds it from the snapshot
// to the assumption, and the pool reconciler holds it while it decides
// which workers to delete. Pools never wait for each other.
type assumptions struct {
	mu    sync.Mutex
	pools map[types.NamespacedName]*poolAssumptions
}

type poolAssumptions struct {
	mu   sync.Mutex
	pods map[types.UID]scheduler.Placement
}

func newAssumptions() *assumptions {
	return &assumptions{pools: map[types.NamespacedName]*poolAssumptions{}}
}

// lock locks the pool's assumptions; call the returned func to unlock.
func (a *assumptions) lock(pool types.NamespacedName) (*poolAssumptions, func()) {
	a.mu.Lock()
	p, ok := a.pools[pool]
	if !ok {
		p = &poolAssumptions{pods: map[types.UID]scheduler.Placement{}}
		a.pools[pool] = p
	}
	a.mu.Unlock()
	p.mu.Lock()
	return p, p.mu.Unlock
}

// snapshot turns the pool's unfinished jobs, as the cache has them, into
// the scheduler's view: a job the cache shows queued holds the worker it
// was assumed on. It drops the assumptions the cache has caught up with.
func (p *poolAssumptions) snapshot(jobs []*shellv1alpha1.ShellJob) []scheduler.Job {
	seen := make(map[types.UID]bool, len(jobs))
	out := make([]scheduler.Job, 0, len(jobs))
	for _, j := range jobs {
		seen[j.UID] = true
		sj := scheduler.JobOf(j)
		if assumed, ok := p.pods[j.UID]; ok {
			if sj.Pod == "" {
				sj.Pod = assumed.Pod
			} else {
				delete(p.pods, j.UID)
			}
		}
		out = append(out, sj)
	}
	for uid := range p.pods {
		if !seen[uid] {
			delete(p.pods, uid)
		}
	}
	return out
}

// assume records where the job was placed.
func (p *poolAssumptions) assume(uid types.UID, d scheduler.Placement) { p.pods[uid] = d }

// assumed is where the job was placed, if the cache may not show it.
func (p *poolAssumptions) assumed(uid types.UID) (scheduler.Placement, bool) {
	d, ok := p.pods[uid]
	return d, ok
}
