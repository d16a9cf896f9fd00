package controllers

import (
	"context"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
)

// patchJob sends patch, computed from job, to the job or to its
// subresource (status), if one is named, and has the API server answer
// with the job's metadata alone, which it copies into job; job's spec and
// status stay as this process wrote them. The answer of a whole job
// carries its command, up to 64 KiB, that the operator neither keeps nor
// reads back: under a burst of jobs, encoding and decoding those answers
// was a share of the API server's and the operator's work
// (BENCHMARKS.md).
func patchJob(ctx context.Context, c client.Client, job *shellv1alpha1.ShellJob, patch client.Patch, subresource string) error {
	data, err := patch.Data(job)
	if err != nil {
		return err
	}
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(shellv1alpha1.GroupVersion.WithKind("ShellJob"))
	m.Namespace, m.Name = job.Namespace, job.Name
	raw := client.RawPatch(patch.Type(), data)
	if subresource == "" {
		err = c.Patch(ctx, m, raw)
	} else {
		err = c.SubResource(subresource).Patch(ctx, m, raw)
	}
	if err != nil {
		return err
	}
	m.ManagedFields = nil
	job.ObjectMeta = m.ObjectMeta
	return nil
}

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
