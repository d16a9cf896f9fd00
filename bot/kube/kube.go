// Package kube is the bot's cluster on the Kubernetes API: ShellJobs
// through controller-runtime, their output and files through the stream
// API (internal/streamclient): the bot reaches no worker pod. What the bot
// does for a chat admin goes through a client that impersonates the
// admin's identity (People): their commands, stops, approvals, and the
// reads of their jobs' output and files. As itself, the bot only watches
// the jobs, keeps its bookkeeping annotations and stops jobs as it goes
// offline.
package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/bot"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/identity"
	"shelljob.dev/shelljob/internal/kubeutil"
	"shelljob.dev/shelljob/internal/shelljob"
	"shelljob.dev/shelljob/internal/streamclient"
)

// Cluster implements bot.Cluster.
type Cluster struct {
	// Client reaches the API server as the bot itself.
	Client    client.Client
	Namespace string
	// People act for the chat admins (As).
	People *People
	// Identities says who each admin is: a job is read as its sender's.
	Identities *identity.Mapping
	// Stream is the bot's own client of the stream API of Namespace, from
	// which People make each admin's: the bot reads nothing as itself.
	Stream *streamclient.Client
	// Cache holds the ShellJobs of Namespace (NewCache), started: Watch and
	// List read them there, all through one watch.
	Cache cache.Cache

	feedMu  sync.Mutex
	jobFeed *kubeutil.Feed
}

var _ bot.Cluster = (*Cluster)(nil)

// As implements bot.Cluster: the cluster acting as id, through People.
func (c *Cluster) As(id identity.Identity) bot.Person { return person{c: c, id: id} }

// person is the cluster acting for one chat admin.
type person struct {
	c  *Cluster
	id identity.Identity
}

var _ bot.Person = person{}

func (p person) client() (client.Client, error) { return p.c.People.Client(p.id) }

// Submit implements bot.Person.
func (p person) Submit(ctx context.Context, name string, spec shellv1alpha1.ShellJobSpec, annotations map[string]string) (*shellv1alpha1.ShellJob, error) {
	cl, err := p.client()
	if err != nil {
		return nil, err
	}
	sj := &shellv1alpha1.ShellJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.c.Namespace, Annotations: annotations},
		Spec:       spec,
	}
	if sj.Name == "" {
		sj.GenerateName = "tg-"
	}
	err = shelljob.CreateQuotaCounted(ctx, func() error { return cl.Create(ctx, sj) })
	if kubeutil.IsPassing(err) && sj.Name != "" {
		// A create that timed out may have been carried out: the job is
		// then ours, and is followed rather than reported as not made.
		var made shellv1alpha1.ShellJob
		if gerr := p.c.Client.Get(ctx, client.ObjectKeyFromObject(sj), &made); gerr == nil && shelljob.SameCommand(&made, spec) {
			return &made, nil
		}
	}
	if apierrors.IsAlreadyExists(err) && sj.Name != "" {
		var old shellv1alpha1.ShellJob
		if err := p.c.Client.Get(ctx, client.ObjectKeyFromObject(sj), &old); err != nil {
			return nil, fmt.Errorf("get existing shelljob %s: %w", sj.Name, err)
		}
		return &old, fmt.Errorf("create shelljob %s: %w", sj.Name, bot.ErrJobExists)
	}
	if err != nil {
		return nil, fmt.Errorf("create shelljob: %w", err)
	}
	return sj, nil
}

// Stop implements bot.Person: a User stop in the admin's name.
func (p person) Stop(ctx context.Context, name string) (shelljob.StopOutcome, *shellv1alpha1.ShellJob, error) {
	cl, err := p.client()
	if err != nil {
		return 0, nil, err
	}
	return shelljob.Stop(ctx, jobPatcher{cl, p.c.Namespace}, name, shellv1alpha1.StopReasonUser, p.id.User)
}

// Release implements bot.Person.
func (p person) Release(ctx context.Context, name string) error {
	cl, err := p.client()
	if err != nil {
		return err
	}
	return patchJob(ctx, cl, p.c.Namespace, name, map[string]any{"spec": map[string]any{"hold": false}})
}

// RestartPool implements bot.Person: it sets the pool's restartedAt, and
// nothing else.
func (p person) RestartPool(ctx context.Context, pool string) error {
	cl, err := p.client()
	if err != nil {
		return err
	}
	data, _ := json.Marshal(map[string]any{"spec": map[string]any{"restartedAt": metav1.Now()}})
	sp := &shellv1alpha1.ShellPool{ObjectMeta: metav1.ObjectMeta{Namespace: p.c.Namespace, Name: pool}}
	if err := cl.Patch(ctx, sp, client.RawPatch(types.MergePatchType, data)); err != nil {
		return fmt.Errorf("restart pool %s: %w", pool, err)
	}
	return nil
}

// Decide implements bot.Person: the decision is the admin's, by their
// user and Telegram id.
func (p person) Decide(ctx context.Context, name string, d shellv1alpha1.ApprovalDecision) (shelljob.DecideOutcome, *shellv1alpha1.ShellJob, error) {
	cl, err := p.client()
	if err != nil {
		return 0, nil, err
	}
	return shelljob.Decide(ctx, jobPatcher{cl, p.c.Namespace}, name,
		shellv1alpha1.ShellJobApproval{Decision: d, By: p.id.User, TelegramUser: p.id.TelegramUser})
}

// Watch implements bot.JobWatcher, from Cache.
func (c *Cluster) Watch(ctx context.Context, name string, fn func(*shellv1alpha1.ShellJob)) error {
	feed, err := c.feed(ctx)
	if err != nil {
		return err
	}
	key := types.NamespacedName{Namespace: c.Namespace, Name: name}
	changed, unsubscribe := feed.Subscribe(key)
	defer unsubscribe()
	seen := ""
	for {
		var sj shellv1alpha1.ShellJob
		err := c.Cache.Get(ctx, key, &sj)
		switch {
		case apierrors.IsNotFound(err) && seen != "":
			return nil
		case apierrors.IsNotFound(err):
			// The cache may not have seen a job created a moment ago.
			if err := c.Client.Get(ctx, key, &sj); apierrors.IsNotFound(err) {
				return nil
			} else if err != nil {
				return fmt.Errorf("get shelljob %s: %w", name, err)
			}
		case err != nil:
			return fmt.Errorf("get shelljob %s from the cache: %w", name, err)
		case sj.ResourceVersion != seen:
			seen = sj.ResourceVersion
			fn(&sj)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// patchJob merge-patches the job name of namespace with body, through c.
func patchJob(ctx context.Context, c client.Client, namespace, name string, body any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	sj := &shellv1alpha1.ShellJob{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	return c.Patch(ctx, sj, client.RawPatch(types.MergePatchType, data))
}

// Stop implements bot.JobStopper, as the bot itself, on a fresh read of
// the job.
func (c *Cluster) Stop(ctx context.Context, name string, reason shellv1alpha1.StopReason) (shelljob.StopOutcome, *shellv1alpha1.ShellJob, error) {
	return shelljob.Stop(ctx, jobPatcher{c.Client, c.Namespace}, name, reason, "")
}

// jobPatcher is a shelljob.JobPatcher of the jobs of namespace, through
// client.
type jobPatcher struct {
	client    client.Client
	namespace string
}

func (p jobPatcher) Get(ctx context.Context, name string) (*shellv1alpha1.ShellJob, error) {
	var sj shellv1alpha1.ShellJob
	err := p.client.Get(ctx, types.NamespacedName{Namespace: p.namespace, Name: name}, &sj)
	return &sj, err
}

func (p jobPatcher) MergePatch(ctx context.Context, name string, patch []byte) (*shellv1alpha1.ShellJob, error) {
	sj := &shellv1alpha1.ShellJob{ObjectMeta: metav1.ObjectMeta{Namespace: p.namespace, Name: name}}
	err := p.client.Patch(ctx, sj, client.RawPatch(types.MergePatchType, patch))
	return sj, err
}

// Annotate implements bot.JobAnnotator, as the bot itself.
func (c *Cluster) Annotate(ctx context.Context, name, key, value string) error {
	return patchJob(ctx, c.Client, c.Namespace, name, map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: value}}})
}

// List implements bot.JobLister, from Cache.
func (c *Cluster) List(ctx context.Context) ([]shellv1alpha1.ShellJob, error) {
	var list shellv1alpha1.ShellJobList
	if err := c.Cache.List(ctx, &list, client.InNamespace(c.Namespace)); err != nil {
		return nil, fmt.Errorf("list shelljobs: %w", err)
	}
	return slices.DeleteFunc(list.Items, func(sj shellv1alpha1.ShellJob) bool {
		return sj.Spec.Origin.Source != shellv1alpha1.OriginTelegram
	}), nil
}

// Pool implements bot.PoolReader, as the bot itself.
func (c *Cluster) Pool(ctx context.Context, name string) (*shellv1alpha1.ShellPool, error) {
	var sp shellv1alpha1.ShellPool
	if err := c.Client.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: name}, &sp); err != nil {
		return nil, fmt.Errorf("get pool %s: %w", name, err)
	}
	return &sp, nil
}

// Follow implements bot.OutputFollower.
func (c *Cluster) Follow(ctx context.Context, sj *shellv1alpha1.ShellJob, offset int64, w io.Writer) (int64, error) {
	r, err := c.reader(sj)
	if err != nil {
		return offset, err
	}
	reached, err := r.Follow(ctx, sj.Name, offset, w)
	return reached, lost(err)
}

// FollowText implements bot.OutputFollower.
func (c *Cluster) FollowText(ctx context.Context, sj *shellv1alpha1.ShellJob, mode agentapi.TextMode, w io.Writer) error {
	r, err := c.reader(sj)
	if err != nil {
		return err
	}
	return lost(r.FollowText(ctx, sj.Name, mode, w))
}

// PutFiles implements bot.FileMover.
func (c *Cluster) PutFiles(ctx context.Context, job string, tar io.Reader) error {
	r, err := c.readerOf(ctx, job)
	if err != nil {
		return err
	}
	return r.PutFiles(ctx, job, tar)
}

// GetFiles implements bot.FileMover.
func (c *Cluster) GetFiles(ctx context.Context, job string, w io.Writer) error {
	r, err := c.readerOf(ctx, job)
	if err != nil {
		return err
	}
	return lost(r.GetFiles(ctx, job, w))
}

// reader is the stream API acting as the sender of sj, whom the bot
// created it as (the origin admission policy saw to it), through
// myshelljobs: the API server's audit log names the person whose job is
// read, and the bot holds no right to read jobs of its own. An older
// bot's job, which names no Kubernetes sender, is nobody's to read.
func (c *Cluster) reader(sj *shellv1alpha1.ShellJob) (*streamclient.Client, error) {
	o := sj.Spec.Origin
	if o.Source != shellv1alpha1.OriginTelegram || o.TelegramUser == 0 {
		return nil, fmt.Errorf("shelljob %s names no Telegram sender to read it as (an older bot's job, or not a chat's)", sj.Name)
	}
	return c.People.Stream(c.Identities.Of(o.TelegramUser), c.Stream)
}

// readerOf is the reader of the job named job, read from the cache, else,
// for a job the cache has not seen yet (one just created), from the API
// server.
func (c *Cluster) readerOf(ctx context.Context, job string) (*streamclient.Client, error) {
	key := types.NamespacedName{Namespace: c.Namespace, Name: job}
	var sj shellv1alpha1.ShellJob
	err := c.Cache.Get(ctx, key, &sj)
	if apierrors.IsNotFound(err) {
		err = c.Client.Get(ctx, key, &sj)
	}
	if err != nil {
		return nil, fmt.Errorf("get shelljob %s: %w", job, err)
	}
	return c.reader(&sj)
}

// lost marks the error of an output or files that are lost (410 Gone) as
// the bot knows it.
func lost(err error) error {
	if errors.Is(err, streamclient.ErrOutputLost) {
		return fmt.Errorf("%w: %w", bot.ErrWorkerGone, err)
	}
	return err
}
