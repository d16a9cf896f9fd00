package kubeutil

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StripForCache drops, in place, the metadata that a cache of objects
// never reads and that can be as large as the object itself: the managed
// fields (cache.TransformStripManagedFields) and kubectl's
// last-applied-configuration, a copy of the whole object as last applied.
// It writes only what it drops: an informer may pass it an object it
// already holds, which readers share (kubernetes/kubernetes#124352).
func StripForCache(o metav1.Object) {
	if o.GetManagedFields() != nil {
		o.SetManagedFields(nil)
	}
	if a := o.GetAnnotations(); a != nil {
		if _, ok := a[corev1.LastAppliedConfigAnnotation]; ok {
			delete(a, corev1.LastAppliedConfigAnnotation)
			o.SetAnnotations(a)
		}
	}
}
