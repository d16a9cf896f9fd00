package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

// queued makes a job of pool "p" in namespace "ns", created at seconds
// after t0.
func queued(name string, at int) *shellv1alpha1.ShellJob {
	j := utiltesting.MakeShellJob(name, "ns").Pool("p").Obj()
	j.UID = types.UID("uid-" + name)
	j.CreationTimestamp = metav1.NewTime(t0.Add(time.Duration(at) * time.Second))
	return j
}

var poolP = types.NamespacedName{Namespace: "ns", Name: "p"}

// heads takes the heads now, failing if Heads blocks.
func heads(t *testing.T, q *Queues) []Head {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h := q.Heads(ctx)
	if h == nil {
		t.Fatal("Heads blocked: no pool has news")
	}
	return h
}

// names are the names of the jobs of each head, by pool name.
func names(hs []Head) map[string][]string {
	out := map[string][]string{}
	for _, h := range hs {
		for _, j := range h.Jobs {
			out[h.Pool.Name] = append(out[h.Pool.Name], j.Name)
		}
	}
	return out
}

// noNews checks that Heads blocks: no pool has news.
func noNews(t *testing.T, q *Queues) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if h := q.Heads(ctx); h != nil {
		t.Fatalf("Heads returned %v, want it to block: no news", names(h))
	}
}

func TestQueuesHeadsBlocksUntilNews(t *testing.T) {
	q := NewQueues()
	got := make(chan []Head)
	go func() { got <- q.Heads(context.Background()) }()
	select {
	case h := <-got:
		t.Fatalf("Heads returned %v from empty queues", names(h))
	case <-time.After(20 * time.Millisecond):
	}
	q.AddOrUpdate(queued("a", 0))
	select {
	case h := <-got:
		if diff := cmp.Diff(map[string][]string{"p": {"a"}}, names(h)); diff != "" {
			t.Errorf("heads (-want +got):\n%s", diff)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Heads still blocked after a job was queued")
	}
	// The news was taken: Heads blocks again, until a worker may be free.
	noNews(t, q)
	q.Wake(poolP)
	if diff := cmp.Diff(map[string][]string{"p": {"a"}}, names(heads(t, q))); diff != "" {
		t.Errorf("heads after Wake (-want +got):\n%s", diff)
	}
	// A pool with no waiting job has no news to give.
	q.Wake(types.NamespacedName{Namespace: "ns", Name: "other"})
	noNews(t, q)
}

func TestQueuesHeadsEndsWithItsContext(t *testing.T) {
	q := NewQueues()
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan []Head)
	go func() { got <- q.Heads(ctx) }()
	cancel()
	select {
	case h := <-got:
		if h != nil {
			t.Errorf("Heads = %v after its context ended, want nil", names(h))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Heads still blocked after its context ended")
	}
}

func TestQueuesFIFO(t *testing.T) {
	q := NewQueues()
	for _, j := range []*shellv1alpha1.ShellJob{queued("c", 2), queued("b-2", 1), queued("a", 0), queued("b-1", 1)} {
		q.AddOrUpdate(j)
	}
	other := utiltesting.MakeShellJob("x", "ns").Pool("other").Obj()
	q.AddOrUpdate(other)
	want := map[string][]string{"p": {"a", "b-1", "b-2", "c"}, "other": {"x"}}
	if diff := cmp.Diff(want, names(heads(t, q))); diff != "" {
		t.Errorf("heads (-want +got):\n%s", diff)
	}
}

func TestQueuesReenqueuedJobKeepsItsPlace(t *testing.T) {
	q := NewQueues()
	for i, n := range []string{"a", "b", "c"} {
		q.AddOrUpdate(queued(n, i))
	}
	heads(t, q)

	// A newer copy of a queued job is no news, and keeps its place.
	b := queued("b", 1)
	b.Status.Number = 7
	q.AddOrUpdate(b)
	noNews(t, q)
	q.Wake(poolP)
	h := heads(t, q)
	if diff := cmp.Diff(map[string][]string{"p": {"a", "b", "c"}}, names(h)); diff != "" {
		t.Errorf("heads (-want +got):\n%s", diff)
	}
	if n := h[0].Jobs[1].Status.Number; n != 7 {
		t.Errorf("job b as queued has number %d, want the newer copy's 7", n)
	}

	// b records its worker and leaves; it loses it before it started, and
	// is queued again, in its old place.
	placed := b.DeepCopy()
	placed.Status.Pod = "w-0"
	q.AddOrUpdate(placed)
	noNews(t, q)
	q.AddOrUpdate(b.DeepCopy())
	if diff := cmp.Diff(map[string][]string{"p": {"a", "b", "c"}}, names(heads(t, q))); diff != "" {
		t.Errorf("heads after b was queued again (-want +got):\n%s", diff)
	}

	// A change of the worker it prefers is news.
	c := queued("c", 2)
	c.Annotations = map[string]string{shellv1alpha1.AnnotationPreferredWorker: "w-1"}
	q.AddOrUpdate(c)
	if diff := cmp.Diff(map[string][]string{"p": {"a", "b", "c"}}, names(heads(t, q))); diff != "" {
		t.Errorf("heads after c's change (-want +got):\n%s", diff)
	}
}

func TestQueuesOlderCopyChangesNothing(t *testing.T) {
	q := NewQueues()
	a := queued("a", 0)
	a.ResourceVersion = "20"
	a.Status.Number = 3
	q.AddOrUpdate(a)
	stale := queued("a", 0)
	stale.ResourceVersion = "10"
	q.AddOrUpdate(stale)
	if n := heads(t, q)[0].Jobs[0].Status.Number; n != 3 {
		t.Errorf("queued copy has number %d, want the newer copy's 3", n)
	}
}

func TestQueuesDeletedJobLeaves(t *testing.T) {
	q := NewQueues()
	for i, n := range []string{"a", "b", "c"} {
		q.AddOrUpdate(queued(n, i))
	}
	q.Delete(types.NamespacedName{Namespace: "ns", Name: "b"})
	if diff := cmp.Diff(map[string][]string{"p": {"a", "c"}}, names(heads(t, q))); diff != "" {
		t.Errorf("heads (-want +got):\n%s", diff)
	}
	// A stop takes a job out, and so does its end.
	stopped := queued("a", 0)
	stopped.Spec.Stop = true
	q.AddOrUpdate(stopped)
	ended := queued("c", 2)
	ended.Status.Phase = shellv1alpha1.PhaseSucceeded
	q.AddOrUpdate(ended)
	if n := q.Len(); n != 0 {
		t.Errorf("%d jobs queued, want none", n)
	}
	// A job made again under the name of a deleted one is another job.
	q.AddOrUpdate(queued("d", 3))
	again := queued("d", 9)
	again.UID = "uid-d-again"
	q.AddOrUpdate(again)
	h := heads(t, q)
	if len(h) != 1 || len(h[0].Jobs) != 1 || h[0].Jobs[0].UID != again.UID {
		t.Errorf("heads %v, want the new d alone", names(h))
	}
}

func TestQueuesDecision(t *testing.T) {
	q := NewQueues()
	a, b := queued("a", 0), queued("b", 1)
	q.AddOrUpdate(a)
	q.AddOrUpdate(b)
	heads(t, q)
	placed := Placement{Decision: Decision{Pod: "w-0", Reason: "Assigned", Message: "assigned to worker w-0"}, Revision: "r1"}

	// The first decision is news for the job's reconcile; the same one
	// again is not.
	n := queued("n", 5)
	q.AddOrUpdate(n)
	waiting := Placement{Decision: Decision{Reason: "NoIdleWorker"}}
	if !q.Decide(n, waiting) {
		t.Error("n's first decision needs no telling")
	}
	if q.Decide(n, waiting) {
		t.Error("n's decision, made again, needs telling")
	}
	if !q.Decide(n, placed) {
		t.Error("n's new decision needs no telling")
	}

	// A reconcile that waits hears the decision.
	got := make(chan Placement)
	go func() {
		d, ok := q.Decision(context.Background(), a)
		if !ok {
			t.Error("no decision for a")
		}
		got <- d
	}()
	time.Sleep(20 * time.Millisecond)
	q.Decide(a, placed)
	select {
	case d := <-got:
		if d != placed {
			t.Errorf("decision %+v, want %+v", d, placed)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the reconcile that waits never heard the decision")
	}
	// A decision made already needs no wait.
	if d, ok := q.Decision(context.Background(), a); !ok || d != placed {
		t.Errorf("decision %+v, %v; want %+v", d, ok, placed)
	}

	// A job that leaves its queue ends the wait, with no decision.
	done := make(chan bool)
	go func() {
		_, ok := q.Decision(context.Background(), b)
		done <- ok
	}()
	time.Sleep(10 * time.Millisecond)
	q.Delete(types.NamespacedName{Namespace: "ns", Name: "b"})
	if ok := <-done; ok {
		t.Error("a decision for a deleted job")
	}
	if q.Decide(b, placed) {
		t.Error("a decision for a job no longer queued needs telling")
	}

	// So does the end of the wait's context.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	c := queued("c", 2)
	q.AddOrUpdate(c)
	if _, ok := q.Decision(ctx, c); ok {
		t.Error("a decision for c, which none was made for")
	}
}

// TestQueuesFreedWorker: a job given a worker that leaves its queue
// without having recorded it frees the worker, which is news; one that
// recorded it is not.
func TestQueuesFreedWorker(t *testing.T) {
	q := NewQueues()
	a, b, c := queued("a", 0), queued("b", 1), queued("c", 2)
	for _, j := range []*shellv1alpha1.ShellJob{a, b, c} {
		q.AddOrUpdate(j)
	}
	heads(t, q)
	q.Decide(a, Placement{Decision: Decision{Pod: "w-0"}})
	q.Decide(b, Placement{Decision: Decision{Pod: "w-1"}})
	q.Decide(c, Placement{Decision: Decision{Reason: "NoIdleWorker"}})

	recorded := a.DeepCopy()
	recorded.Status.Pod = "w-0"
	q.AddOrUpdate(recorded)
	noNews(t, q)

	stopped := b.DeepCopy()
	stopped.Spec.Stop = true
	q.AddOrUpdate(stopped)
	if diff := cmp.Diff(map[string][]string{"p": {"c"}}, names(heads(t, q))); diff != "" {
		t.Errorf("heads after b was stopped (-want +got):\n%s", diff)
	}
}
