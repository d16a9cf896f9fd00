package controllers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/metrics"
	"shelljob.dev/shelljob/internal/shelljob"
)

// PoolFinalizer is on every pool, so that its workers, which live apart and
// carry no owner reference to it, are deleted with it.
const PoolFinalizer = "shell.shelljob.dev/workers"

// DefaultDeliveryGrace is how long a retired worker stays for a job that
// ended on it but is not marked delivered yet: the bot reads the output
// and the $SHELLJOB_OUT files from the worker after the end.
const DefaultDeliveryGrace = 10 * time.Minute

// counterBatch is how often, at most, a pool's status is written when only
// its job counters (busy workers, queued jobs) changed: a burst of jobs
// costs a pool write a second, not one per job.
const counterBatch = time.Second

// ShellPoolReconciler keeps a pool's worker pods: spec.replicas workers of
// the current revision, each a pod named <pool>-<revision>-<index>. A new
// revision brings up new workers at once; an old worker takes no new job
// and is deleted once no unfinished job holds it, and every job that ended
// on it was delivered (AnnotationDelivered) or ended DeliveryGrace ago. A
// worker pod that failed is deleted and made again. A deleted pool's
// workers are deleted before its finalizer (PoolFinalizer) lets it go.
type ShellPoolReconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	// WorkerNamespace holds the worker pods. Defaults to each pool's own
	// namespace.
	WorkerNamespace string
	// WorkerImage is the image of pools that name none. Defaults to
	// DefaultWorkerImage.
	WorkerImage string
	// WorkerSecurity is what worker pods allow their agent. Defaults to
	// none: jobs run in the pod's namespaces.
	WorkerSecurity WorkerSecurity
	// ServiceAccounts says which ServiceAccounts workers may run as. A
	// pool that names another gets no workers, and its workers of the
	// current revision are retired as those of an old one. Defaults to
	// none.
	ServiceAccounts ServiceAccountPolicy
	// Clock stamps conditions. Defaults to the real clock.
	Clock clock.PassiveClock
	// DeliveryGrace bounds how long a retired worker waits for the
	// delivery of the jobs that ended on it. Defaults to
	// DefaultDeliveryGrace.
	DeliveryGrace time.Duration

	assumed *assumptions
	// poolJobs lists each pool's unfinished jobs.
	poolJobs *PoolIndex
	writes   *writes
	// counted is when each pool's status was last written, for batching
	// the job counters.
	counted *writeTimes
	// streams is kicked after each pass, so new workers get their events
	// stream at once.
	streams interface{ Kick() }
	// workers are the agents' own states, for the JobsIsolated and
	// SpoolRoom conditions; wakes brings a pass when one changed.
	workers *workerStates
	wakes   <-chan event.TypedGenericEvent[*shellv1alpha1.ShellPool]
}

// wakePool asks for a pass over pool on wakes, without waiting: a full
// channel brings one anyway.
func wakePool(wakes chan<- event.TypedGenericEvent[*shellv1alpha1.ShellPool], pool types.NamespacedName) {
	p := &shellv1alpha1.ShellPool{}
	p.Namespace, p.Name = pool.Namespace, pool.Name
	select {
	case wakes <- event.TypedGenericEvent[*shellv1alpha1.ShellPool]{Object: p}:
	default:
	}
}

// +kubebuilder:rbac:groups=shell.shelljob.dev,namespace=shelljob-system,resources=shellpools,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=shell.shelljob.dev,namespace=shelljob-system,resources=shellpools/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=shell.shelljob.dev,namespace=shelljob-system,resources=shellpools/finalizers,verbs=update
// +kubebuilder:rbac:groups=core,namespace=shelljob-workers,resources=pods,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=events.k8s.io,namespace=shelljob-system,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,namespace=shelljob-workers,resources=events,verbs=create;patch

// Reconcile brings one pool's workers to its spec and writes its status,
// in one patch at the end.
func (r *ShellPoolReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, reterr error) {
	pool := &shellv1alpha1.ShellPool{}
	if err := r.Client.Get(ctx, req.NamespacedName, pool); err != nil {
		if apierrors.IsNotFound(err) {
			r.writes.forget(req.NamespacedName)
			r.counted.forget(req.NamespacedName)
			metrics.ForgetPool(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if r.writes.stale(pool) {
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	}
	if pool.DeletionTimestamp != nil {
		metrics.ForgetPool(pool.Name)
		return ctrl.Result{}, r.deleteWorkers(ctx, pool)
	}
	if !controllerutil.ContainsFinalizer(pool, PoolFinalizer) {
		// Before any worker is made, so that none outlives the pool.
		from := pool.DeepCopy()
		controllerutil.AddFinalizer(pool, PoolFinalizer)
		if err := r.Client.Patch(ctx, pool, client.MergeFromWithOptions(from, client.MergeFromWithOptimisticLock{})); err != nil {
			return afterPatch(ctrl.Result{}, nil, client.IgnoreNotFound(err))
		}
		r.writes.wrote(pool)
	}
	base := pool.DeepCopy()
	defer func() {
		if equality.Semantic.DeepEqual(base.Status, pool.Status) {
			return
		}
		if wait := r.counterWait(req.NamespacedName, &base.Status, &pool.Status); wait > 0 {
			res.RequeueAfter = min(cmp.Or(res.RequeueAfter, wait), wait)
			return
		}
		err := r.Client.Status().Patch(ctx, pool, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
		if err == nil {
			r.writes.wrote(pool)
			r.counted.wrote(req.NamespacedName, r.Clock.Now())
		}
		res, reterr = afterPatch(res, reterr, client.IgnoreNotFound(err))
	}()
	return r.reconcile(ctx, pool)
}

// counterWait tells how long to hold a status write back: while only the
// job counters changed, until counterBatch after the pool's last write.
func (r *ShellPoolReconciler) counterWait(pool types.NamespacedName, old, cur *shellv1alpha1.ShellPoolStatus) time.Duration {
	same := cur.DeepCopy()
	same.BusyReplicas, same.QueuedJobs = old.BusyReplicas, old.QueuedJobs
	if !equality.Semantic.DeepEqual(*old, *same) {
		return 0
	}
	last, ok := r.counted.last(pool)
	if !ok {
		return 0
	}
	return counterBatch - r.Clock.Since(last)
}

// writeTimes is when each object was last written.
type writeTimes struct {
	mu sync.Mutex
	at map[types.NamespacedName]time.Time
}

func (w *writeTimes) wrote(key types.NamespacedName, at time.Time) {
	w.mu.Lock()
	w.at[key] = at
	w.mu.Unlock()
}

func (w *writeTimes) last(key types.NamespacedName) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	at, ok := w.at[key]
	return at, ok
}

func (w *writeTimes) forget(key types.NamespacedName) {
	w.mu.Lock()
	delete(w.at, key)
	w.mu.Unlock()
}

func (r *ShellPoolReconciler) reconcile(ctx context.Context, pool *shellv1alpha1.ShellPool) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	rev := Revision(pool, r.WorkerImage, r.WorkerSecurity)
	key := client.ObjectKeyFromObject(pool)
	workerNS := workerNamespace(r.WorkerNamespace, pool.Namespace)
	refusal := r.ServiceAccounts.Refusal(pool, workerNS)

	var podList corev1.PodList
	if err := r.Client.List(ctx, &podList, client.InNamespace(workerNS), workerLabels(pool)); err != nil {
		return ctrl.Result{}, err
	}
	pods := podList.Items
	jobs, err := r.poolJobs.jobsOfPool(pool.Namespace, pool.Name)
	if err != nil {
		return ctrl.Result{}, err
	}

	// Decide which workers go under the pool's lock, so that no job is
	// placed on a worker while it is being retired.
	assumed, unlock := r.assumed.lock(key)
	defer unlock()
	snapshot := assumed.snapshot(jobs)
	load := map[string]int32{}
	var queued int32
	for _, j := range snapshot {
		switch {
		case j.Pod != "":
			load[j.Pod]++
		case !j.Stopping && (pool.Spec.Approval == nil || j.Approved):
			// A job that awaits approval waits for no worker yet.
			queued++
		}
	}

	var (
		errs    []error
		recheck time.Duration
	)
	// idle tells whether a worker may go: no job holds it, and each job
	// that ended on it was delivered or ran out of grace.
	idle := func(pod *corev1.Pod) bool {
		if load[pod.Name] > 0 {
			return false
		}
		n, left, err := r.undelivered(ctx, pool.Namespace, pod.Name)
		if err != nil {
			errs = append(errs, err)
			return false
		}
		if left > 0 && (recheck == 0 || left < recheck) {
			recheck = left
		}
		return n == 0
	}
	current := map[int32]*corev1.Pod{}
	oldRevs := map[string]*shellv1alpha1.OldRevision{}
	var created, retired []string
	for i := range pods {
		pod := &pods[i]
		index, revision := workerIndex(pod), pod.Labels[shellv1alpha1.LabelRevision]
		isCurrent := refusal == "" && revision == rev && index >= 0 && index < pool.Spec.Replicas && ownedBy(pod, pool)
		switch {
		case pod.DeletionTimestamp != nil:
			// Going; its name is free again once it is gone.
		case !ownedBy(pod, pool):
			// Left by an earlier pool of the same name, whose deletion did
			// not finish: it goes once no job holds it, as a retired one.
			if idle(pod) {
				retired = append(retired, pod.Name)
				errs = append(errs, r.deletePod(ctx, pod))
			}
			continue
		case pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded:
			r.Recorder.Eventf(pool, pod, corev1.EventTypeWarning, "WorkerFailed", "Replace",
				"Worker %s ended (%s); making a new one", pod.Name, shelljob.PodEndReason(pod))
			errs = append(errs, r.deletePod(ctx, pod))
			continue
		case r.sandboxStuck(pool, pod, &recheck):
			errs = append(errs, r.deletePod(ctx, pod))
			continue
		case !isCurrent && idle(pod):
			retired = append(retired, pod.Name)
			errs = append(errs, r.deletePod(ctx, pod))
			continue
		}
		if isCurrent {
			current[index] = pod
			continue
		}
		o, ok := oldRevs[revision]
		if !ok {
			o = &shellv1alpha1.OldRevision{Revision: revision}
			oldRevs[revision] = o
		}
		o.Pods++
		o.RunningJobs += load[pod.Name]
	}
	for i := range pool.Spec.Replicas {
		if _, ok := current[i]; ok || refusal != "" {
			continue
		}
		pod := workerPod(pool, workerNS, rev, i, r.WorkerImage, r.WorkerSecurity)
		if err := r.Client.Create(ctx, pod); err != nil {
			if !apierrors.IsAlreadyExists(err) {
				errs = append(errs, fmt.Errorf("create worker %s: %w", pod.Name, err))
			}
			continue
		}
		created = append(created, pod.Name)
	}
	if len(created) > 0 {
		r.Recorder.Eventf(pool, nil, corev1.EventTypeNormal, "WorkersCreated", "Scale",
			"Created %d worker(s) of revision %s: %v", len(created), rev, created)
	}
	if len(retired) > 0 {
		r.Recorder.Eventf(pool, nil, corev1.EventTypeNormal, "WorkersRetired", "Scale",
			"Deleted %d idle worker(s) of old revisions or beyond replicas: %v", len(retired), retired)
	}
	if old := pool.Status.Revision; old != "" && old != rev {
		r.Recorder.Eventf(pool, nil, corev1.EventTypeNormal, "NewRevision", "Restart",
			"New revision %s replaces %s: queued jobs go to the new workers, old workers go once their jobs end", rev, old)
	}

	if r.setStatus(pool, rev, current, load, queued, oldRevs, refusal) && refusal != "" {
		r.Recorder.Eventf(pool, nil, corev1.EventTypeWarning, shellv1alpha1.ShellPoolAvailableReasonServiceAccountNotAllowed, "Scale", refusal)
	}
	metrics.SetPoolWorkers(pool.Name, pool.Status.ReadyReplicas, pool.Status.BusyReplicas)
	if r.streams != nil {
		r.streams.Kick()
	}
	log.V(2).Info("Reconciled pool", "revision", rev, "created", len(created), "retired", len(retired))
	if err := errors.Join(errs...); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: recheck}, nil
}

// sandboxStuck tells whether pod has waited shelljob.SandboxTimeout for its
// sandbox, and says so in an Event; until then it brings recheck forward
// to the timeout.
func (r *ShellPoolReconciler) sandboxStuck(pool *shellv1alpha1.ShellPool, pod *corev1.Pod, recheck *time.Duration) bool {
	stuck, wait := shelljob.SandboxStuck(pod, r.Clock.Now(), shelljob.SandboxTimeout)
	if wait > 0 && (*recheck == 0 || wait < *recheck) {
		*recheck = wait
	}
	if stuck {
		r.Recorder.Eventf(pool, pod, corev1.EventTypeWarning, "WorkerStuck", "Replace",
			"Worker %s has had no sandbox for %v since it was scheduled to %s (its Events say why); making a new one",
			pod.Name, shelljob.SandboxTimeout, pod.Spec.NodeName)
	}
	return stuck
}

// undelivered counts the jobs that ended on a worker within the delivery
// grace and are not marked delivered, and tells when the first of them
// runs out of grace (0: none).
func (r *ShellPoolReconciler) undelivered(ctx context.Context, ns, pod string) (int, time.Duration, error) {
	jobs, err := undeliveredJobs(ctx, r.Client, ns, pod)
	if err != nil {
		return 0, 0, err
	}
	now := r.Clock.Now()
	var (
		n       int
		recheck time.Duration
	)
	for i := range jobs {
		j := &jobs[i]
		if j.Status.CompletionTime == nil {
			continue
		}
		left := j.Status.CompletionTime.Add(r.DeliveryGrace).Sub(now)
		if left <= 0 {
			continue
		}
		n++
		if recheck == 0 || left < recheck {
			recheck = left
		}
	}
	return n, recheck, nil
}

// setStatus writes the pool's status; refusal, if any, is why it gets no
// workers. It reports whether the Available condition changed.
func (r *ShellPoolReconciler) setStatus(pool *shellv1alpha1.ShellPool, rev string, current map[int32]*corev1.Pod,
	load map[string]int32, queued int32, oldRevs map[string]*shellv1alpha1.OldRevision, refusal string) bool {
	s := &pool.Status
	s.ObservedGeneration = pool.Generation
	s.Revision = rev
	s.WorkerNamespace = workerNamespace(r.WorkerNamespace, pool.Namespace)
	s.Replicas, s.ReadyReplicas, s.BusyReplicas = 0, 0, 0
	for _, pod := range current {
		if pod.DeletionTimestamp != nil {
			continue
		}
		s.Replicas++
		if podReady(pod) {
			s.ReadyReplicas++
		}
		if load[pod.Name] > 0 {
			s.BusyReplicas++
		}
	}
	s.Ready = fmt.Sprintf("%d/%d", s.ReadyReplicas, pool.Spec.Replicas)
	s.QueuedJobs = queued
	s.OldRevisions = nil
	for _, o := range oldRevs {
		s.OldRevisions = append(s.OldRevisions, *o)
	}
	slices.SortFunc(s.OldRevisions, func(a, b shellv1alpha1.OldRevision) int { return cmp.Compare(a.Revision, b.Revision) })
	r.setWorkerConditions(pool, current)
	switch {
	case refusal != "":
		return shelljob.SetAvailableCondition(pool, r.Clock.Now(), metav1.ConditionFalse,
			shellv1alpha1.ShellPoolAvailableReasonServiceAccountNotAllowed, refusal)
	case s.ReadyReplicas >= pool.Spec.Replicas:
		return shelljob.SetAvailableCondition(pool, r.Clock.Now(), metav1.ConditionTrue, shellv1alpha1.ShellPoolAvailableReasonAllReady,
			fmt.Sprintf("%d of %d workers of revision %s are ready", s.ReadyReplicas, pool.Spec.Replicas, rev))
	default:
		return shelljob.SetAvailableCondition(pool, r.Clock.Now(), metav1.ConditionFalse, shellv1alpha1.ShellPoolAvailableReasonNotReady,
			fmt.Sprintf("%d of %d workers of revision %s are ready", s.ReadyReplicas, pool.Spec.Replicas, rev))
	}
}

// setWorkerConditions sets JobsIsolated and SpoolRoom from what the
// current workers' agents said, with a Warning Event when one turns False.
func (r *ShellPoolReconciler) setWorkerConditions(pool *shellv1alpha1.ShellPool, current map[int32]*corev1.Pod) {
	if r.workers == nil {
		return
	}
	var pods []types.NamespacedName
	for _, pod := range current {
		if pod.DeletionTimestamp == nil {
			pods = append(pods, client.ObjectKeyFromObject(pod))
		}
	}
	for _, c := range r.workers.poolConditions(pods) {
		if shelljob.SetPoolCondition(pool, r.Clock.Now(), c.Type, c.Status, c.Reason, c.Message) && c.Status == metav1.ConditionFalse {
			r.Recorder.Eventf(pool, nil, corev1.EventTypeWarning, c.Reason, "Workers", "%s", c.Message)
		}
	}
}

// deleteWorkers deletes every worker of a pool that is being deleted, and
// lets the pool go once each is gone or going: their jobs end as
// WorkerLost, as with an owner reference's cascade.
func (r *ShellPoolReconciler) deleteWorkers(ctx context.Context, pool *shellv1alpha1.ShellPool) error {
	if !controllerutil.ContainsFinalizer(pool, PoolFinalizer) {
		return nil
	}
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(workerNamespace(r.WorkerNamespace, pool.Namespace)),
		workerLabels(pool)); err != nil {
		return err
	}
	var errs []error
	for i := range pods.Items {
		if pods.Items[i].DeletionTimestamp == nil {
			errs = append(errs, r.deletePod(ctx, &pods.Items[i]))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if len(pods.Items) > 0 {
		r.Recorder.Eventf(pool, nil, corev1.EventTypeNormal, "WorkersDeleted", "Delete",
			"Deleted the %d worker(s) of the deleted pool", len(pods.Items))
	}
	from := pool.DeepCopy()
	controllerutil.RemoveFinalizer(pool, PoolFinalizer)
	return client.IgnoreNotFound(r.Client.Patch(ctx, pool, client.MergeFromWithOptions(from, client.MergeFromWithOptimisticLock{})))
}

// deletePod deletes a worker, only the one that was looked at.
func (r *ShellPoolReconciler) deletePod(ctx context.Context, pod *corev1.Pod) error {
	err := r.Client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete worker %s: %w", pod.Name, err)
	}
	return nil
}

// workerIndex is the pod's worker index label, -1 if it has none.
func workerIndex(pod *corev1.Pod) int32 {
	i, err := strconv.ParseInt(pod.Labels[shellv1alpha1.LabelWorker], 10, 32)
	if err != nil {
		return -1
	}
	return int32(i)
}

// SetupWithManager wires the pool controller: pools, their worker pods
// (by their pool labels), and the jobs that hold or wait for their workers.
func (r *ShellPoolReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.WorkerImage == "" {
		r.WorkerImage = DefaultWorkerImage
	}
	if r.DeliveryGrace == 0 {
		r.DeliveryGrace = DefaultDeliveryGrace
	}
	if r.assumed == nil {
		r.assumed = newAssumptions()
	}
	r.writes = newWrites()
	r.counted = &writeTimes{at: map[types.NamespacedName]time.Time{}}
	b := ctrl.NewControllerManagedBy(mgr)
	if r.wakes != nil {
		b = b.WatchesRawSource(source.Channel(r.wakes, &handler.TypedEnqueueRequestForObject[*shellv1alpha1.ShellPool]{}))
	}
	return b.
		For(&shellv1alpha1.ShellPool{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(
			func(_ context.Context, o client.Object) []reconcile.Request {
				if pool, ok := poolOf(o); ok {
					return []reconcile.Request{{NamespacedName: pool}}
				}
				return nil
			})).
		Watches(&shellv1alpha1.ShellJob{}, handler.EnqueueRequestsFromMapFunc(
			func(_ context.Context, o client.Object) []reconcile.Request {
				j := o.(*shellv1alpha1.ShellJob)
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: j.Namespace, Name: shelljob.Pool(j)}}}
			})).
		Named("shellpool").
		Complete(r)
}
