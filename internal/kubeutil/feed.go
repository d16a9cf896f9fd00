package kubeutil

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Feed tells its subscribers that a cache's copy of an object changed.
// They read the copy itself from the cache, which never goes back to an
// older version, whatever the order the news comes in.
type Feed struct {
	mu   sync.Mutex
	subs map[types.NamespacedName]map[chan struct{}]bool
}

// NewFeed returns a Feed of the objects of inf, added to its handlers.
func NewFeed(inf cache.Informer) (*Feed, error) {
	f := &Feed{subs: map[types.NamespacedName]map[chan struct{}]bool{}}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    f.changed,
		UpdateFunc: func(_, obj any) { f.changed(obj) },
		DeleteFunc: f.changed,
	}); err != nil {
		return nil, fmt.Errorf("feed of an informer: %w", err)
	}
	return f, nil
}

func (f *Feed) changed(obj any) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	o, ok := obj.(client.Object)
	if !ok {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for ch := range f.subs[client.ObjectKeyFromObject(o)] {
		select {
		case ch <- struct{}{}:
		default: // news already waiting says the same
		}
	}
}

// Subscribe returns a channel that gets a value after each change of the
// object key, and what ends the subscription.
func (f *Feed) Subscribe(key types.NamespacedName) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.subs[key] == nil {
		f.subs[key] = map[chan struct{}]bool{}
	}
	f.subs[key][ch] = true
	return ch, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.subs[key], ch)
		if len(f.subs[key]) == 0 {
			delete(f.subs, key)
		}
	}
}
