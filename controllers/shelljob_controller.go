package controllers

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/metrics"
	"shelljob.dev/shelljob/internal/scheduler"
	"shelljob.dev/shelljob/internal/shelljob"
)

const (
	// DefaultJobTTL is how long a finished job that sets no TTL stays: a
	// day of chat commands, each up to 64 KiB of command text, in etcd and
	// in every cache of jobs.
	DefaultJobTTL = 24 * time.Hour
	// DefaultHoldTimeout is how long a job may stay held (spec.hold) on
	// its worker: a client puts a replied-to file in seconds, and one that
	// restarted in between would otherwise keep the worker for ever.
	DefaultHoldTimeout = 10 * time.Minute
	// KeepFinishedJobs, as a JobTTL, keeps the finished jobs that set no
	// TTL.
	KeepFinishedJobs time.Duration = -1
	// JobFinalizer is on a job from the pass that places it to its end,
	// so that a job deleted while it runs is stopped first and its worker
	// freed only once the command is gone. That pass writes it after the
	// Start; a job deleted before it landed has its command killed (gone).
	JobFinalizer = "shell.shelljob.dev/stop"
	// agentCallTimeout bounds a Start or a Signal: a worker that hangs
	// must not hold a reconcile worker, which other pools need too. It is
	// the longest exec of the operator, and below GracefulShutdownTimeout.
	agentCallTimeout = 30 * time.Second
)

// ShellJobReconciler runs each ShellJob through its life: it numbers the
// job, queues it for a worker of its pool and records where the placement
// (placer, on internal/scheduler) put it, starts its command through the
// worker's agent, stops it by escalating signals, and records how it ended
// (internal/shelljob decides the end). Every pass writes the job's status
// once, in a deferred patch. The phases have a file each:
// shelljob_start.go (queued, assigned, started), shelljob_stop.go
// (running, stopping) and shelljob_end.go (exited, lost, finished).
type ShellJobReconciler struct {
	Client client.Client
	// APIReader reads past the cache: the job counter, and each job's
	// command when it starts, which the cache does not keep.
	APIReader client.Reader
	Agent     agentapi.Client
	Recorder  events.EventRecorder
	// WorkerNamespace holds the worker pods. Defaults to each job's own
	// namespace.
	WorkerNamespace string
	// StopGrace is the wait between the signals of a stop. Defaults to
	// agentapi.StopGrace.
	StopGrace time.Duration
	// JobTTL is how long a finished job that sets no
	// spec.ttlSecondsAfterFinished stays. Defaults to DefaultJobTTL;
	// KeepFinishedJobs (any negative value) keeps such jobs.
	JobTTL time.Duration
	// DeliveryGrace is how long a finished job that its reader still has
	// to deliver is kept, whatever its TTL. Defaults to
	// DefaultDeliveryGrace.
	DeliveryGrace time.Duration
	// HoldTimeout is how long a job may stay held on its worker before it
	// fails (HoldTimedOut). Defaults to DefaultHoldTimeout.
	HoldTimeout time.Duration
	// Clock tells the time. Defaults to the real clock.
	Clock clock.PassiveClock
	// MaxConcurrentReconciles bounds the passes that run at once: a pass
	// may wait on an exec into a worker. Defaults to 16.
	MaxConcurrentReconciles int

	// queues are the jobs that wait for a worker, which the placement
	// places; it hands each its decision.
	queues    *scheduler.Queues
	placement *placer
	// memory is what this process remembers of the unfinished jobs.
	memory  *jobMemory
	numbers *numberer
	writes  *writes
	// told are the finished jobs whose worker was told their spool may go.
	told *spoolNotices
	// bootTime is when this reconciler was set up: a placement made after
	// it is known to this process, with every Start it made.
	bootTime time.Time
}

// +kubebuilder:rbac:groups=shell.shelljob.dev,namespace=shelljob-system,resources=shelljobs,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups=shell.shelljob.dev,namespace=shelljob-system,resources=shelljobs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=core,namespace=shelljob-workers,resources=pods/exec,verbs=create;get
// +kubebuilder:rbac:groups=core,namespace=shelljob-workers,resources=events,verbs=list
// +kubebuilder:rbac:groups=core,namespace=shelljob-system,resources=configmaps,verbs=get;create;update
// +kubebuilder:rbac:groups=events.k8s.io,namespace=shelljob-system,resources=events,verbs=create;patch

// Reconcile moves one job along and patches its status at the end, and
// once before for a placement it makes, which it records before the start.
// A shutdown does not cut a pass: its agent call answers and its status is
// written (GracefulShutdownTimeout).
func (r *ShellJobReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, reterr error) {
	job := &shellv1alpha1.ShellJob{}
	if err := r.Client.Get(ctx, req.NamespacedName, job); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, r.gone(ctx, req.NamespacedName)
		}
		return ctrl.Result{}, err
	}
	r.memory.track(req.NamespacedName, job.UID)
	if r.writes.stale(job) {
		// Our last write's event is on its way and brings the next pass.
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	}
	base := job.DeepCopy()
	now := r.Clock.Now()
	defer func() {
		res, reterr = afterPatch(res, reterr, r.write(ctx, base, job, now))
	}()
	res, reterr = r.reconcile(ctx, job, now)
	if reterr != nil || shelljob.IsAssigned(base) || !shelljob.IsAssigned(job) {
		return res, reterr
	}
	// Placed by this pass: the placement is recorded before anything runs,
	// so that a restart never runs a job on a second worker, and then the
	// command starts in the same pass rather than on the write's event.
	// The finalizer goes with the write after the Start, off the start's
	// way: a job deleted before it lands is stopped by gone.
	command := r.readCommand(ctx, job)
	err := r.write(ctx, base, job, now)
	base = job.DeepCopy()
	if err != nil {
		return afterPatch(ctrl.Result{}, nil, err)
	}
	controllerutil.AddFinalizer(job, JobFinalizer)
	return r.assigned(ctx, job, now, command)
}

// write patches what a pass changed of the job since base, and records
// the milestones it wrote.
func (r *ShellJobReconciler) write(ctx context.Context, base, job *shellv1alpha1.ShellJob, now time.Time) error {
	ctx, cancel := detached(ctx, statusWriteTimeout)
	defer cancel()
	m := r.milestones(base, job, now)
	wroteStatus, err := r.patch(ctx, base, job)
	if wroteStatus {
		r.record(client.ObjectKeyFromObject(job), job.UID, m, now)
	}
	if err == nil && job.ResourceVersion != base.ResourceVersion {
		r.writes.wrote(job)
	}
	return err
}

// milestone is what a pass's status write records of a job's life, for
// the metrics.
type milestone struct {
	pool                    string
	placed, started, ended  bool
	queueWait, startLatency time.Duration
	phase, reason           string
}

// milestones compares the status a pass read with the one it is about to
// write. A stale read cannot record a step twice: the pass waits for the
// cache (writes.stale), and the optimistic lock fails its write.
func (r *ShellJobReconciler) milestones(base, job *shellv1alpha1.ShellJob, now time.Time) milestone {
	m := milestone{pool: shelljob.Pool(job)}
	if !shelljob.IsAssigned(base) && shelljob.IsAssigned(job) {
		m.placed = true
		m.queueWait = now.Sub(job.CreationTimestamp.Time)
	}
	if !shelljob.IsStarted(base) && shelljob.IsStarted(job) && job.Status.StartTime != nil {
		m.started = true
		placed, ok := r.memory.placedAt(client.ObjectKeyFromObject(job), job.UID)
		if !ok {
			// Placed before this process started: the condition keeps
			// whole seconds only.
			placed = scheduledAt(job)
		}
		m.startLatency = job.Status.StartTime.Sub(placed)
	}
	if !shelljob.IsFinished(base) && shelljob.IsFinished(job) {
		m.ended = true
		m.phase = string(job.Status.Phase)
		if c := meta.FindStatusCondition(job.Status.Conditions, shellv1alpha1.ShellJobFinished); c != nil {
			m.reason = c.Reason
		}
	}
	return m
}

// record counts the milestones of a status write that succeeded, so that
// a pass whose write failed and that runs again counts them once.
func (r *ShellJobReconciler) record(key types.NamespacedName, uid types.UID, m milestone, now time.Time) {
	if m.placed {
		metrics.JobPlaced(m.pool, m.queueWait)
		r.memory.placed(key, uid, now)
	}
	if m.started {
		metrics.JobStarted(m.pool, m.startLatency)
		r.memory.placed(key, uid, time.Time{})
	}
	if m.ended {
		metrics.JobFinished(m.pool, m.phase, m.reason)
	}
}

// afterPatch folds the deferred patch's error into a pass's result. A
// conflict means the pass read a stale cache: the newer object's event
// brings another pass, and a short requeue makes sure of it, without an
// error to log.
func afterPatch(res ctrl.Result, reterr, patchErr error) (ctrl.Result, error) {
	switch {
	case patchErr == nil:
		return res, reterr
	case apierrors.IsConflict(patchErr) && reterr == nil:
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	default:
		return res, errors.Join(reterr, patchErr)
	}
}

// conflictRetry is how soon a pass whose patch met a newer object runs
// again.
const conflictRetry = 100 * time.Millisecond

// patch writes the status, and the finalizers and labels, each only if
// changed and only over the version that was read. The status goes first,
// so that a job's end is recorded before its finalizer lets it go and
// before it settles (shelljob.Settle); but a finalizer put on goes before
// it, so that the watch shows a job running only once its finalizer holds
// it, and the write that shows it is the pass's last. It reports whether it
// wrote a changed status, even when the metadata's patch then failed.
func (r *ShellJobReconciler) patch(ctx context.Context, base, job *shellv1alpha1.ShellJob) (wroteStatus bool, err error) {
	finalizers, labels := slices.Clone(job.Finalizers), maps.Clone(job.Labels)
	writeMetadata := func() error {
		from := job.DeepCopy()
		from.Finalizers, from.Labels = base.Finalizers, base.Labels
		job.Finalizers, job.Labels = finalizers, labels
		return client.IgnoreNotFound(patchJob(ctx, r.Client, job, client.MergeFromWithOptions(from, client.MergeFromWithOptimisticLock{}), ""))
	}
	metadataChanged := !slices.Equal(base.Finalizers, finalizers) || !maps.Equal(base.Labels, labels)
	if metadataChanged && !controllerutil.ContainsFinalizer(base, JobFinalizer) && controllerutil.ContainsFinalizer(job, JobFinalizer) {
		if err := writeMetadata(); err != nil {
			return false, err
		}
		metadataChanged = false
	}
	if !equality.Semantic.DeepEqual(base.Status, job.Status) {
		// The cache fills status.summary in from the command it does not
		// keep (shelljob.Slim), so every status write carries the summary:
		// the first one records it.
		from := base.DeepCopy()
		from.ObjectMeta = *job.ObjectMeta.DeepCopy()
		from.Status.Summary = ""
		err := patchJob(ctx, r.Client, job, client.MergeFromWithOptions(from, client.MergeFromWithOptimisticLock{}), "status")
		if err != nil {
			return false, client.IgnoreNotFound(err)
		}
		wroteStatus = true
	}
	if !metadataChanged {
		return wroteStatus, nil
	}
	return wroteStatus, writeMetadata()
}

func (r *ShellJobReconciler) reconcile(ctx context.Context, job *shellv1alpha1.ShellJob, now time.Time) (ctrl.Result, error) {
	num, err := r.numbers.number(ctx, job)
	if err != nil {
		return ctrl.Result{}, err
	}
	if job.Status.Number == 0 {
		r.Recorder.Eventf(job, nil, corev1.EventTypeNormal, "Queued", "Queue", "Queued as #%d on pool %s%s", num, shelljob.Pool(job), createdBy(job))
	}
	job.Status.Number = num
	job.Status.Phase = shelljob.Phase(job)
	switch {
	case shelljob.IsFinished(job):
		// Its end is recorded: what memory holds of it can go.
		r.memory.forget(client.ObjectKeyFromObject(job), job.UID)
		return r.finished(ctx, job, now, false)
	case shelljob.IsStarted(job):
		return r.running(ctx, job, now)
	case shelljob.IsAssigned(job):
		return r.assigned(ctx, job, now, func() (string, error) { return r.command(ctx, client.ObjectKeyFromObject(job), job.UID) })
	default:
		return r.queued(ctx, job, now)
	}
}

// createdBy is ", created by alice" for a job whose origin names its
// user, as the Queued Event tells it.
func createdBy(job *shellv1alpha1.ShellJob) string {
	if u := job.Spec.Origin.User; u != "" {
		return ", created by " + u
	}
	return ""
}

// gone drops what this process holds of a job that was deleted, whatever
// its phase: one deleted past its finalizer never reached its end here.
// A command this process knows runs for it, as when the job went between
// its Start and its finalizer's write, is killed first: nothing would stop
// it otherwise. A kill that fails is tried again, with the workqueue's
// backoff.
func (r *ShellJobReconciler) gone(ctx context.Context, key types.NamespacedName) error {
	if uid, pod, ok := r.memory.unended(key); ok {
		if err := r.killOrphan(ctx, key, uid, pod); err != nil {
			return err
		}
	}
	r.writes.forget(key)
	r.memory.forget(key, "")
	r.told.forget(key)
	r.queues.Delete(key)
	return nil
}

// SetupWithManager wires the job controller: jobs, the worker pods they
// run on, their pools, and the jobs that wakes asks for (the agents'
// reports, the placement's decisions). The placement must be set
// (setup does).
func (r *ShellJobReconciler) SetupWithManager(mgr ctrl.Manager, wakes ...<-chan event.TypedGenericEvent[*shellv1alpha1.ShellJob]) error {
	if r.placement == nil {
		return errors.New("controllers: the ShellJob reconciler has no placement")
	}
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.StopGrace == 0 {
		r.StopGrace = agentapi.StopGrace
	}
	if r.JobTTL == 0 {
		r.JobTTL = DefaultJobTTL
	}
	if r.HoldTimeout == 0 {
		r.HoldTimeout = DefaultHoldTimeout
	}
	if r.DeliveryGrace == 0 {
		r.DeliveryGrace = DefaultDeliveryGrace
	}
	if r.MaxConcurrentReconciles == 0 {
		r.MaxConcurrentReconciles = 16
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.memory == nil {
		r.memory = newJobMemory()
	}
	r.queues = r.placement.queues
	r.numbers = newNumberer(r.APIReader, r.Client, r.Client)
	r.numbers.memory = r.memory
	r.writes = newWrites()
	r.told = newSpoolNotices()
	r.bootTime = r.Clock.Now()

	b := ctrl.NewControllerManagedBy(mgr).
		For(&shellv1alpha1.ShellJob{}).
		Watches(&shellv1alpha1.ShellJob{}, handler.Funcs{
			CreateFunc: func(_ context.Context, e event.CreateEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				r.enqueue(e.Object.(*shellv1alpha1.ShellJob))
			},
			UpdateFunc: func(_ context.Context, e event.UpdateEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				old, cur := e.ObjectOld.(*shellv1alpha1.ShellJob), e.ObjectNew.(*shellv1alpha1.ShellJob)
				r.enqueue(cur)
				if old.Status.Pod != "" && (shelljob.IsFinished(cur) || cur.Status.Pod != old.Status.Pod) {
					// A worker is free.
					r.queues.Wake(scheduler.PoolOf(cur))
				}
			},
			DeleteFunc: func(ctx context.Context, e event.DeleteEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				j, ok := e.Object.(*shellv1alpha1.ShellJob)
				if !ok {
					return
				}
				r.queues.Delete(client.ObjectKeyFromObject(j))
				if j.Status.Pod == "" {
					return
				}
				r.queues.Wake(scheduler.PoolOf(j))
				if shelljob.IsFinished(j) {
					// Deleted by someone else than its TTL: nobody can
					// read its spool any more.
					go func() {
						if err := r.tellDelivered(context.WithoutCancel(ctx), j); err != nil {
							ctrl.LoggerFrom(ctx).V(1).Info("Could not tell a worker a deleted job's spool may go", "err", err.Error())
						}
						r.told.forget(client.ObjectKeyFromObject(j))
					}()
				}
			},
		}).
		Watches(&corev1.Pod{}, handler.Funcs{
			CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				r.enqueueForPod(ctx, q, e.Object)
			},
			UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				r.enqueueForPod(ctx, q, e.ObjectNew)
			},
			DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				r.enqueueForPod(ctx, q, e.Object)
			},
		}).
		Watches(&shellv1alpha1.ShellPool{}, handler.Funcs{
			CreateFunc: func(_ context.Context, e event.CreateEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				r.queues.Wake(client.ObjectKeyFromObject(e.Object))
			},
			UpdateFunc: func(_ context.Context, e event.UpdateEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				if e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() {
					r.queues.Wake(client.ObjectKeyFromObject(e.ObjectNew))
				}
			},
		})
	for _, w := range wakes {
		b = b.WatchesRawSource(source.Channel(w, &handler.TypedEnqueueRequestForObject[*shellv1alpha1.ShellJob]{}))
	}
	return b.WithOptions(controller.Options{MaxConcurrentReconciles: r.MaxConcurrentReconciles}).
		Named("shelljob").
		Complete(r)
}

// enqueue puts a job that waits for a worker in its pool's queue, a copy
// of it, or takes it out once it no longer waits.
func (r *ShellJobReconciler) enqueue(j *shellv1alpha1.ShellJob) {
	if scheduler.Waits(j) {
		j = j.DeepCopy()
	}
	r.queues.AddOrUpdate(j)
}

// enqueueForPod wakes the jobs on a worker pod, and the placement of its
// pool: the pod may have become ready, or gone.
func (r *ShellJobReconciler) enqueueForPod(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], o client.Object) {
	pool, ok := poolOf(o)
	if !ok {
		return
	}
	jobs, err := jobsOnPod(ctx, r.Client, pool.Namespace, o.GetName())
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "List the jobs of a worker", "pod", client.ObjectKeyFromObject(o))
	}
	for _, j := range jobs {
		q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&j)})
	}
	r.queues.Wake(pool)
}
