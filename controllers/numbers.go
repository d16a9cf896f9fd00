package controllers

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/shelljob"
)

const (
	// CounterConfigMap holds, in each namespace with jobs, the next job
	// number under the key CounterKey. The operator alone writes it.
	CounterConfigMap = "shelljob-counter"
	// CounterKey is the ConfigMap key of the next number.
	CounterKey = "next"
	// counterAttempts bounds the retries of a conflicting counter update.
	counterAttempts = 5
	// maxNumberBlock bounds how many numbers one counter update takes.
	maxNumberBlock = 64
	// minNumberBlock is how many numbers a counter update takes at least:
	// a lone job takes the numbers of the next lone jobs too, whose passes
	// then cost no counter update before their placement. A restart of
	// the operator leaves the numbers it took and gave to no job unused:
	// a gap of at most minNumberBlock-1.
	minNumberBlock = 8
)

// numberer hands out the #N of jobs: unique in a namespace and increasing,
// across restarts of the operator. The next number lives in a ConfigMap
// updated with optimistic concurrency, so a number is never given twice
// even if two operators ever ran at once; a restart, or a crash between
// taking a number and recording it in the job's status, only leaves a
// gap.
type numberer struct {
	// reader reads the ConfigMap from the API server, not from a cache.
	reader client.Reader
	writer client.Writer
	// jobs lists the jobs, to start a lost counter above every number used.
	jobs client.Reader

	// memory holds the numbers given to jobs whose status may not show
	// them yet, so a retried reconcile reuses its number instead of taking
	// another.
	memory *jobMemory

	mu sync.Mutex
	// blocks holds, by namespace, the numbers the last counter update took
	// and that no job got yet. One update takes a number for each job of
	// the pool that waits for one, and minNumberBlock at least, so a burst
	// of jobs costs a few counter updates, not one per job, and so do lone
	// jobs one after another. A job deleted before it got its number
	// leaves its number to the next job.
	blocks map[string]*numberBlock
	// counters holds, by namespace, the counter as this operator's last
	// update left it. The next update starts from it rather than reading
	// it again, so that a block of numbers costs one round trip, not two:
	// a counter changed by anyone else fails that update with a conflict,
	// and the retry reads it.
	counters map[string]*corev1.ConfigMap
}

// numberBlock is a run of numbers taken from the counter: next is the
// first unused, end is past the last.
type numberBlock struct{ next, end int64 }

func newNumberer(reader, jobs client.Reader, writer client.Writer) *numberer {
	return &numberer{reader: reader, jobs: jobs, writer: writer, memory: newJobMemory(),
		blocks: map[string]*numberBlock{}, counters: map[string]*corev1.ConfigMap{}}
}

// number returns the job's number, taking the next one if it has none.
func (n *numberer) number(ctx context.Context, job *shellv1alpha1.ShellJob) (int64, error) {
	key := client.ObjectKeyFromObject(job)
	n.mu.Lock()
	defer n.mu.Unlock()
	if job.Status.Number != 0 {
		n.memory.setNumber(key, job.UID, 0)
		return job.Status.Number, nil
	}
	if num := n.memory.number(key, job.UID); num != 0 {
		return num, nil
	}
	if b := n.blocks[job.Namespace]; b != nil && b.next < b.end {
		num := b.next
		b.next++
		n.memory.setNumber(key, job.UID, num)
		return num, nil
	}
	size := max(n.waiting(ctx, job), minNumberBlock)
	var err error
	for range counterAttempts {
		var num int64
		if num, err = n.next(ctx, job.Namespace, size); err == nil {
			n.memory.setNumber(key, job.UID, num)
			n.blocks[job.Namespace] = &numberBlock{next: num + 1, end: num + size}
			return num, nil
		}
		delete(n.counters, job.Namespace)
		if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) && !apierrors.IsNotFound(err) {
			break
		}
	}
	return 0, fmt.Errorf("take a job number: %w", err)
}

// waiting counts the jobs of the job's pool that wait for a number, itself
// included, up to maxNumberBlock; 1 if the cache cannot tell. It looks at
// a few blocks' worth of them, not all: under a burst thousands wait, and
// a list of them all in each counter update held MiBs (BENCHMARKS.md).
// Those it sees may hold numbers not yet in their status (memory); a count
// that falls short only makes the block smaller.
func (n *numberer) waiting(ctx context.Context, job *shellv1alpha1.ShellJob) int64 {
	jobs, err := jobsAwaitingNumber(ctx, n.jobs, job.Namespace, shelljob.Pool(job), 4*maxNumberBlock)
	if err != nil {
		return 1
	}
	var k int64
	for _, j := range jobs {
		if j.UID != job.UID && n.memory.number(client.ObjectKeyFromObject(&j), j.UID) == 0 {
			k++
		}
	}
	return min(k+1, maxNumberBlock)
}

// next takes size numbers from the counter and returns the first. It
// starts from the counter as its last update left it, if it knows it.
func (n *numberer) next(ctx context.Context, ns string, size int64) (int64, error) {
	cm, err := n.counters[ns].DeepCopy(), error(nil)
	if cm == nil {
		cm = &corev1.ConfigMap{}
		err = n.reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: CounterConfigMap}, cm)
	}
	if apierrors.IsNotFound(err) {
		first, err := n.highest(ctx, ns)
		if err != nil {
			return 0, err
		}
		first++
		cm = &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: ns,
				Name:      CounterConfigMap,
				Labels:    map[string]string{"app.kubernetes.io/managed-by": "shelljob-operator"},
			},
			Data: map[string]string{CounterKey: strconv.FormatInt(first+size, 10)},
		}
		if err := n.writer.Create(ctx, cm); err != nil {
			return 0, err
		}
		n.counters[ns] = cm
		return first, nil
	}
	if err != nil {
		return 0, err
	}
	num, err := strconv.ParseInt(cm.Data[CounterKey], 10, 64)
	if err != nil || num < 1 {
		// A hand-edited counter: start again above every number in use.
		if num, err = n.highest(ctx, ns); err != nil {
			return 0, err
		}
		num++
	}
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[CounterKey] = strconv.FormatInt(num+size, 10)
	// Update sends the resourceVersion read or last written: a change by
	// anyone else makes it fail with a conflict, and the caller reads the
	// counter again.
	if err := n.writer.Update(ctx, cm); err != nil {
		return 0, err
	}
	n.counters[ns] = cm
	return num, nil
}

// highest is the highest number among the namespace's jobs: those of the
// cache, and the settled ones, which it leaves out, by their number label.
func (n *numberer) highest(ctx context.Context, ns string) (int64, error) {
	var list shellv1alpha1.ShellJobList
	if err := n.jobs.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return 0, err
	}
	var top int64
	for _, j := range list.Items {
		top = max(top, j.Status.Number)
	}
	err := eachSettled(ctx, n.reader, ns, func(j *metav1.PartialObjectMetadata) {
		top = max(top, shelljob.SettledNumber(j))
	})
	return top, err
}
