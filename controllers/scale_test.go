package controllers

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/shelljob"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

// countingClient counts the ShellJobs that its Lists return: the work a
// reconcile does grows with them.
type countingClient struct {
	client.Client
	jobs atomic.Int64
}

func (c *countingClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	err := c.Client.List(ctx, list, opts...)
	if l, ok := list.(*shellv1alpha1.ShellJobList); ok {
		c.jobs.Add(int64(len(l.Items)))
	}
	return err
}

// createFinishedJobs makes n jobs of the pool that ended an hour ago on a
// worker since retired, and were delivered, as the operator would have
// left them.
func createFinishedJobs(t *testing.T, ns, pool string, n int) {
	t.Helper()
	ctx := context.Background()
	ended := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	const workers = 8
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				j := utiltesting.MakeShellJob(fmt.Sprintf("old-%05d", i), ns).Pool(pool).Command("echo old").Obj()
				j.Annotations = map[string]string{shellv1alpha1.AnnotationDelivered: ended.UTC().Format(time.RFC3339)}
				err := env.Client.Create(ctx, j)
				if err == nil {
					j.Status = shellv1alpha1.ShellJobStatus{
						Number: int64(i + 1), Summary: shelljob.Summary(j.Spec.Command),
						Phase: shellv1alpha1.PhaseSucceeded, Pod: pool + "-retired-0", PodNamespace: ns, Ran: true,
						StartTime: &ended, CompletionTime: &ended, ExitCode: ptr.To[int32](0),
					}
					shelljob.SetScheduledCondition(j, ended.Time, metav1.ConditionTrue, shellv1alpha1.ShellJobScheduledReasonAssigned, "assigned")
					shelljob.SetFinishedCondition(j, ended.Time, shellv1alpha1.ShellJobFinishedReasonExited, "exit 0")
					err = env.Client.Status().Update(ctx, j)
				}
				if err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("job %s: %w", j.Name, err)
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		t.Fatal(first)
	}
}

// TestPoolWithManyFinishedJobs: 5,000 finished jobs of a pool cost its
// reconcile nothing: it looks at the unfinished jobs only, as does a
// placement. Delivered, they settle as the operator starts (as after an
// upgrade from a version that did not settle them), and leave its cache.
func TestPoolWithManyFinishedJobs(t *testing.T) {
	const finishedJobs = 5000
	ctx := context.Background()
	ns := namespace(t)
	start := time.Now()
	createFinishedJobs(t, ns, "shell", finishedJobs)
	t.Logf("created %d finished jobs in %v", finishedJobs, time.Since(start))

	op := startOperator(t, ns, newFakeAgent())
	readyPool(t, ns, "shell", 2)
	createJob(t, utiltesting.MakeShellJob("fresh", ns).Command("sleep 100"))
	waitPhase(t, ns, "fresh", shellv1alpha1.PhaseRunning)
	eventually(t, 2*time.Minute, "the finished jobs settled, out of the cache", func() (bool, string) {
		var list shellv1alpha1.ShellJobList
		if err := op.mgr.GetCache().List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		return len(list.Items) == 1, fmt.Sprintf("%d jobs in the cache", len(list.Items))
	})
	var settled metav1.PartialObjectMetadataList
	settled.SetGroupVersionKind(shellv1alpha1.GroupVersion.WithKind("ShellJobList"))
	if err := env.Client.List(ctx, &settled, client.InNamespace(ns), client.HasLabels{shellv1alpha1.LabelExpires}); err != nil || len(settled.Items) != finishedJobs {
		t.Fatalf("%d jobs settled (%v), want %d", len(settled.Items), err, finishedJobs)
	}
	// The pool's job counters are written at most once a second: wait for
	// the busy worker to be counted, so that the pass below has nothing
	// to write.
	eventually(t, waitShort, "the busy worker counted", func() (bool, string) {
		var pool shellv1alpha1.ShellPool
		if err := op.mgr.GetCache().Get(ctx, types.NamespacedName{Namespace: ns, Name: "shell"}, &pool); err != nil {
			return false, err.Error()
		}
		return pool.Status.BusyReplicas == 1, fmt.Sprint(pool.Status.BusyReplicas)
	})

	counted := &countingClient{Client: op.mgr.GetClient()}
	pools := *op.pools
	pools.Client = counted
	start = time.Now()
	res, err := pools.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "shell"}})
	took := time.Since(start)
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	if n := counted.jobs.Load(); n > 1 {
		t.Errorf("the pool's reconcile looked at %d jobs, want the 1 unfinished", n)
	}
	if res.RequeueAfter != 0 {
		t.Errorf("requeue after %v: every finished job was delivered", res.RequeueAfter)
	}
	t.Logf("a pool reconcile took %v", took)

	jobs, err := op.pools.poolJobs.jobsOfPool(ns, "shell")
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 || jobs[0].Name != "fresh" {
		t.Errorf("the pool's unfinished jobs: %d, want the 1 fresh one", len(jobs))
	}
}
