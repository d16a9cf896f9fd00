package controllers

import (
	"context"
	"errors"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/shelljob"
)

const (
	// settledSweepEvery is how often the settled jobs are swept: a
	// settled job expires at least shelljob.SettleMargin after it settled,
	// and goes within this much of its expiry.
	settledSweepEvery = time.Minute
	// settledPage is how many settled jobs one list call of a sweep reads.
	settledPage = 500
)

// settledSweep deletes the settled jobs (shelljob.Settles) whose time has
// come. The cache holds none of them: each sweep lists their metadata
// alone from the API server, a page at a time. A manager Runnable, on the
// leader only, as the job reconciler.
type settledSweep struct {
	// reader is the API server, not the cache.
	reader client.Reader
	writer client.Writer
	// namespace holds the jobs; empty for every namespace.
	namespace string
	every     time.Duration
	clock     clock.WithTicker
	log       logr.Logger
}

// NeedLeaderElection makes the sweep run on the leader only.
func (s *settledSweep) NeedLeaderElection() bool { return true }

// Start sweeps at once, then every s.every, until ctx ends.
func (s *settledSweep) Start(ctx context.Context) error {
	t := s.clock.NewTicker(s.every)
	defer t.Stop()
	for {
		if err := s.sweep(ctx); err != nil && ctx.Err() == nil {
			s.log.Error(err, "Delete the settled jobs that expired")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
	}
}

// sweep deletes every settled job that has expired. A job that fails to
// go is tried again by the next sweep.
func (s *settledSweep) sweep(ctx context.Context) error {
	now := s.clock.Now()
	var errs []error
	err := eachSettled(ctx, s.reader, s.namespace, func(j *metav1.PartialObjectMetadata) {
		at, ok := shelljob.SettledExpiry(j)
		if !ok || now.Before(at) {
			return
		}
		// The job it listed, not one made since under its name.
		if err := s.writer.Delete(ctx, j, client.Preconditions{UID: &j.UID}); client.IgnoreNotFound(err) != nil {
			errs = append(errs, err)
		}
	})
	return errors.Join(append(errs, err)...)
}

// eachSettled calls fn with the metadata of each settled job of namespace
// (every namespace, if empty), read from reader a page at a time.
func eachSettled(ctx context.Context, reader client.Reader, namespace string, fn func(*metav1.PartialObjectMetadata)) error {
	opts := &client.ListOptions{Namespace: namespace, Limit: settledPage}
	client.HasLabels{shellv1alpha1.LabelExpires}.ApplyToList(opts)
	for {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(shellv1alpha1.GroupVersion.WithKind("ShellJobList"))
		if err := reader.List(ctx, list, opts); err != nil {
			return err
		}
		for i := range list.Items {
			j := &list.Items[i]
			j.SetGroupVersionKind(shellv1alpha1.GroupVersion.WithKind("ShellJob"))
			fn(j)
		}
		if list.Continue == "" {
			return nil
		}
		opts.Continue = list.Continue
	}
}
