package kube

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/kubeutil"
)

// NewCache returns the cache of Cluster.Cache: the ShellJobs of namespace,
// through one list and one watch. A job from elsewhere (the CLI) is kept
// as its name and origin only, and no job keeps its managed fields.
func NewCache(cfg *rest.Config, scheme *runtime.Scheme, namespace string) (cache.Cache, error) {
	return cache.New(cfg, cache.Options{
		Scheme:            scheme,
		DefaultNamespaces: map[string]cache.Config{namespace: {}},
		ByObject:          map[client.Object]cache.ByObject{&shellv1alpha1.ShellJob{}: {Transform: slim}},
	})
}

// syncTimeout bounds StartCache's wait for the first listing.
const syncTimeout = time.Minute

// StartCache starts NewCache's cache until ctx ends, and returns it once it
// holds the ShellJobs of namespace, or fails after syncTimeout.
func StartCache(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, namespace string) (cache.Cache, error) {
	c, err := NewCache(cfg, scheme, namespace)
	if err != nil {
		return nil, err
	}
	if _, err := c.GetInformer(ctx, &shellv1alpha1.ShellJob{}); err != nil {
		return nil, fmt.Errorf("shelljob informer: %w", err)
	}
	go func() { _ = c.Start(ctx) }()
	syncCtx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	if !c.WaitForCacheSync(syncCtx) {
		return nil, fmt.Errorf("the ShellJobs of namespace %s were not listed within %v: can the bot list and watch them?", namespace, syncTimeout)
	}
	return c, nil
}

// slim is NewCache's transform.
func slim(obj any) (any, error) {
	sj, ok := obj.(*shellv1alpha1.ShellJob)
	if !ok {
		return obj, nil
	}
	kubeutil.StripForCache(sj)
	if sj.Spec.Origin.Source == shellv1alpha1.OriginTelegram {
		return sj, nil
	}
	return &shellv1alpha1.ShellJob{
		TypeMeta: sj.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: sj.Name, Namespace: sj.Namespace, UID: sj.UID,
			ResourceVersion: sj.ResourceVersion, CreationTimestamp: sj.CreationTimestamp},
		Spec: shellv1alpha1.ShellJobSpec{Origin: sj.Spec.Origin},
	}, nil
}

// feed returns the cluster's kubeutil.Feed of its jobs, added to the
// cache's informer by the first call that gets the informer: a call whose
// context ended first leaves it to the next.
func (c *Cluster) feed(ctx context.Context) (*kubeutil.Feed, error) {
	c.feedMu.Lock()
	defer c.feedMu.Unlock()
	if c.jobFeed != nil {
		return c.jobFeed, nil
	}
	inf, err := c.Cache.GetInformer(ctx, &shellv1alpha1.ShellJob{})
	if err != nil {
		return nil, fmt.Errorf("shelljob informer: %w", err)
	}
	f, err := kubeutil.NewFeed(inf)
	if err != nil {
		return nil, fmt.Errorf("shelljob informer: %w", err)
	}
	c.jobFeed = f
	return f, nil
}
