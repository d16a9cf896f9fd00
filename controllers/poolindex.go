package controllers

import (
	"errors"
	"maps"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/shelljob"
)

// PoolIndex lists the unfinished jobs of a pool as the cache's own
// objects, by pointer. controller-runtime's List copies each object it
// returns into the list by value: a pass over a pool under a burst, with
// thousands of jobs waiting, copied them all (680 bytes each; 7.4 MB in
// the memory bench's heap profile at its peak, BENCHMARKS.md). Its
// informers do not show their indexers, so CacheOptions makes the cache's
// ShellJob informers through NewInformer, which adds the index and keeps
// each informer's store.
//
// Callers read the jobs and never change them; one that must, changes a
// DeepCopy.
type PoolIndex struct {
	mu     sync.Mutex
	stores []toolscache.Indexer
}

// NewPoolIndex returns an index for CacheOptions to fill and Options to
// read.
func NewPoolIndex() *PoolIndex { return &PoolIndex{} }

// poolIndexName names the index in the ShellJob informers' stores.
const poolIndexName = "shelljob.dev/unfinished-pool"

// poolIndexKey is a job's value in the index: the namespace and pool of
// an unfinished job.
func poolIndexKey(ns, pool string) string { return ns + "/" + pool }

// unfinishedPool is the index's function: the key of an unfinished job,
// none for a finished one.
func unfinishedPool(obj any) ([]string, error) {
	j, ok := obj.(*shellv1alpha1.ShellJob)
	if !ok || shelljob.IsFinished(j) {
		return nil, nil
	}
	return []string{poolIndexKey(j.Namespace, shelljob.Pool(j))}, nil
}

// newInformer is the cache's NewInformer: client-go's informer, with the
// index on ShellJobs.
func (x *PoolIndex) newInformer(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	if _, ok := obj.(*shellv1alpha1.ShellJob); !ok {
		return toolscache.NewSharedIndexInformer(lw, obj, resync, indexers)
	}
	indexers = maps.Clone(indexers)
	indexers[poolIndexName] = unfinishedPool
	inf := toolscache.NewSharedIndexInformer(lw, obj, resync, indexers)
	x.mu.Lock()
	x.stores = append(x.stores, inf.GetIndexer())
	x.mu.Unlock()
	return inf
}

// errNoJobInformer is what a list before the cache made its ShellJob
// informer gets: the controllers watch ShellJobs, so it is there before
// their first pass.
var errNoJobInformer = errors.New("controllers: the cache has no ShellJob informer yet (was it built with CacheOptions and this PoolIndex?)")

// jobsOfPool lists the unfinished jobs of a pool.
func (x *PoolIndex) jobsOfPool(ns, pool string) ([]*shellv1alpha1.ShellJob, error) {
	x.mu.Lock()
	stores := x.stores
	x.mu.Unlock()
	if len(stores) == 0 {
		return nil, errNoJobInformer
	}
	var jobs []*shellv1alpha1.ShellJob
	for _, s := range stores {
		objs, err := s.ByIndex(poolIndexName, poolIndexKey(ns, pool))
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			jobs = append(jobs, o.(*shellv1alpha1.ShellJob))
		}
	}
	return jobs, nil
}
