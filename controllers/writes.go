package controllers

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// writes remembers the resourceVersion of this process's last write to each
// object, so that a pass whose cache still holds an older version waits for
// the cache instead of acting on stale state: it would otherwise repeat a
// side effect (an Event, a signal) that the write it cannot see yet already
// recorded. Resource versions compare as integers (KEP-5504); one that
// does not parse is taken as fresh.
type writes struct {
	mu sync.Mutex
	rv map[types.NamespacedName]string
}

func newWrites() *writes { return &writes{rv: map[types.NamespacedName]string{}} }

// stale tells whether obj, read from the cache, is older than our last write.
func (w *writes) stale(obj client.Object) bool {
	w.mu.Lock()
	last, ok := w.rv[client.ObjectKeyFromObject(obj)]
	w.mu.Unlock()
	if !ok {
		return false
	}
	cmp, err := resourceversion.CompareResourceVersion(obj.GetResourceVersion(), last)
	return err == nil && cmp < 0
}

// wrote records the version that a write returned.
func (w *writes) wrote(obj client.Object) {
	w.mu.Lock()
	w.rv[client.ObjectKeyFromObject(obj)] = obj.GetResourceVersion()
	w.mu.Unlock()
}

// forget drops an object that is gone.
func (w *writes) forget(key types.NamespacedName) {
	w.mu.Lock()
	delete(w.rv, key)
	w.mu.Unlock()
}
