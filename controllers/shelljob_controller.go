package controllers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
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
	// JobFinalizer is on a job from its placement to its end, so that a
	// job deleted while it runs is stopped first and its worker freed
	// only once the command is gone.
	JobFinalizer = "shell.shelljob.dev/stop"
	// startDeadline is how long Start may keep failing, counted from the
	// placement, before the job fails with StartFailed; the workqueue's
	// backoff spaces the attempts.
	startDeadline = 30 * time.Second
	// minStartAttempts is how many Starts this process makes before it
	// gives up, whatever the deadline says: a restarted operator tries
	// again before it fails a job.
	minStartAttempts = 3
	// waitingRecheck looks at a waiting job again even when no event
	// says a worker was freed: a cheap guard against a missed event.
	waitingRecheck = 30 * time.Second
	// factsRecheck is how soon an idle timeout is looked at again while
	// the worker's stream has not reported the job yet.
	factsRecheck = 2 * time.Second
	// agentCallTimeout bounds a Start or a Signal: a worker that hangs
	// must not hold a reconcile worker, which other pools need too. It is
	// the longest exec of the operator, and below GracefulShutdownTimeout.
	agentCallTimeout = 30 * time.Second
)

// ShellJobReconciler runs each ShellJob through its life: it numbers the
// job, places it on a worker of its pool (internal/scheduler decides),
// starts its command through the worker's agent, stops it by escalating
// signals, and records how it ended. Every pass writes the job's status
// once, in a deferred patch.
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
	// WorkerImage is the image of pools that name none, which is part of
	// their revision. Defaults to DefaultWorkerImage.
	WorkerImage string
	// WorkerSecurity is part of the pools' revisions. Defaults to none.
	WorkerSecurity WorkerSecurity
	// ServiceAccounts says which ServiceAccounts workers may run as: the
	// jobs of a pool that names another wait. Defaults to none.
	ServiceAccounts ServiceAccountPolicy
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

	assumed *assumptions
	numbers *numberer
	facts   *factStore
	writes  *writes
	// workers are the agents' own states: a worker whose spool is full
	// gets no job.
	workers *workerStates
	// wake asks for a pass over another job: one that a placement of this
	// pass placed too. It never blocks.
	wake func(*shellv1alpha1.ShellJob)
	// bootTime is when this reconciler was set up: a placement made after
	// it is known to this process, with every Start it made.
	bootTime time.Time

	mu sync.Mutex
	// uids is the UID of each unfinished job that this process may hold
	// memory of, by name: a pass that finds its job gone has the name only.
	uids map[types.NamespacedName]types.UID
	// starts counts the Start calls made in this process, by job.
	starts map[types.UID]int
	// stops holds the signals sent in this process, with their exact
	// times: the API keeps whole seconds only, and a pass that reads a
	// stale job must not send a signal twice.
	stops map[types.UID][]sentSignal
	// placedAt holds when this process recorded each placement whose
	// command has not started yet, exactly, for the start latency.
	placedAt map[types.UID]time.Time
	// told holds the finished jobs whose worker this process told that
	// nobody needs their spool any more (tellDelivered), by name;
	// noDelivered the workers whose agent is older than that.
	told        map[types.NamespacedName]types.UID
	noDelivered map[types.NamespacedName]bool
}

type sentSignal struct {
	step shellv1alpha1.StopStep
	at   time.Time
}

// +kubebuilder:rbac:groups=shell.shelljob.dev,namespace=shelljob-system,resources=shelljobs,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups=shell.shelljob.dev,namespace=shelljob-system,resources=shelljobs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=core,namespace=shelljob-workers,resources=pods/exec,verbs=create;get
// +kubebuilder:rbac:groups=core,namespace=shelljob-workers,resources=events,verbs=list
// +kubebuilder:rbac:groups=core,namespace=shelljob-system,resources=configmaps,verbs=get;create;update
// +kubebuilder:rbac:groups=events.k8s.io,namespace=shelljob-system,resources=events,verbs=create;patch

// Reconcile moves one job along and patches its status once, at the end.
// A shutdown does not cut a pass: its agent call answers and its status is
// written (GracefulShutdownTimeout).
func (r *ShellJobReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, reterr error) {
	job := &shellv1alpha1.ShellJob{}
	if err := r.Client.Get(ctx, req.NamespacedName, job); err != nil {
		if apierrors.IsNotFound(err) {
			r.writes.forget(req.NamespacedName)
			r.gone(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	r.track(req.NamespacedName, job.UID)
	if r.writes.stale(job) {
		// Our last write's event is on its way and brings the next pass.
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	}
	base := job.DeepCopy()
	now := r.Clock.Now()
	defer func() {
		writeCtx, cancel := detached(ctx, statusWriteTimeout)
		defer cancel()
		// Taken before the patch, which truncates the times in job.
		m := r.milestones(base, job, now)
		wroteStatus, err := r.patch(writeCtx, base, job)
		if wroteStatus {
			r.record(job.UID, m, now)
		}
		if err == nil && job.ResourceVersion != base.ResourceVersion {
			r.writes.wrote(job)
		}
		res, reterr = afterPatch(res, reterr, err)
	}()
	return r.reconcile(ctx, job, now)
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
		r.mu.Lock()
		placed, ok := r.placedAt[job.UID]
		r.mu.Unlock()
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
func (r *ShellJobReconciler) record(uid types.UID, m milestone, now time.Time) {
	if m.placed {
		metrics.JobPlaced(m.pool, m.queueWait)
		r.mu.Lock()
		r.placedAt[uid] = now
		r.mu.Unlock()
	}
	if m.started {
		metrics.JobStarted(m.pool, m.startLatency)
		r.mu.Lock()
		delete(r.placedAt, uid)
		r.mu.Unlock()
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

// patch writes the status, then the finalizers, each only if changed and
// only over the version that was read. The status goes first, so that a
// job's end is recorded before its finalizer lets it go. It reports
// whether it wrote a changed status, even when the finalizers' patch
// then failed.
func (r *ShellJobReconciler) patch(ctx context.Context, base, job *shellv1alpha1.ShellJob) (wroteStatus bool, err error) {
	finalizers := slices.Clone(job.Finalizers)
	if !equality.Semantic.DeepEqual(base.Status, job.Status) {
		// The cache fills status.summary in from the command it does not
		// keep (shelljob.Slim), so every status write carries the summary:
		// the first one records it.
		from := base.DeepCopy()
		from.Status.Summary = ""
		err := r.Client.Status().Patch(ctx, job, client.MergeFromWithOptions(from, client.MergeFromWithOptimisticLock{}))
		if err != nil {
			return false, client.IgnoreNotFound(err)
		}
		wroteStatus = true
	}
	if slices.Equal(base.Finalizers, finalizers) {
		return wroteStatus, nil
	}
	from := job.DeepCopy()
	from.Finalizers = base.Finalizers
	job.Finalizers = finalizers
	return wroteStatus, client.IgnoreNotFound(r.Client.Patch(ctx, job, client.MergeFromWithOptions(from, client.MergeFromWithOptimisticLock{})))
}

func (r *ShellJobReconciler) reconcile(ctx context.Context, job *shellv1alpha1.ShellJob, now time.Time) (ctrl.Result, error) {
	num, err := r.numbers.number(ctx, job)
	if err != nil {
		return ctrl.Result{}, err
	}
	if job.Status.Number == 0 {
		r.Recorder.Eventf(job, nil, corev1.EventTypeNormal, "Queued", "Queue", "Queued as #%d on pool %s", num, shelljob.Pool(job))
	}
	job.Status.Number = num
	job.Status.Phase = shelljob.Phase(job)
	switch {
	case shelljob.IsFinished(job):
		// Its end is recorded: what memory holds of it can go.
		r.forget(client.ObjectKeyFromObject(job), job.UID)
		return r.finished(ctx, job, now, false)
	case shelljob.IsStarted(job):
		return r.running(ctx, job, now)
	case shelljob.IsAssigned(job):
		return r.assigned(ctx, job, now)
	default:
		return r.queued(ctx, job, now)
	}
}

// queued places a job that waits for a worker.
func (r *ShellJobReconciler) queued(ctx context.Context, job *shellv1alpha1.ShellJob, now time.Time) (ctrl.Result, error) {
	if shelljob.IsStopRequested(job) {
		return r.stoppedBeforeRun(ctx, job, now)
	}
	pool := &shellv1alpha1.ShellPool{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: shelljob.Pool(job)}, pool); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		msg := fmt.Sprintf("pool %s not found", shelljob.Pool(job))
		if shelljob.SetScheduledCondition(job, now, metav1.ConditionFalse, shellv1alpha1.ShellJobScheduledReasonPoolNotFound, msg) {
			r.Recorder.Eventf(job, nil, corev1.EventTypeWarning, shellv1alpha1.ShellJobScheduledReasonPoolNotFound, "Schedule", msg)
		}
		return ctrl.Result{}, nil
	}
	if why := r.ServiceAccounts.Refusal(pool, workerNamespace(r.WorkerNamespace, pool.Namespace)); why != "" {
		// The pool's next change brings another pass (the pool watch), as
		// does the operator's restart with another list.
		msg := fmt.Sprintf("pool %s: %s", pool.Name, why)
		reason := shellv1alpha1.ShellJobScheduledReasonServiceAccountNotAllowed
		if shelljob.SetScheduledCondition(job, now, metav1.ConditionFalse, reason, msg) {
			r.Recorder.Eventf(job, nil, corev1.EventTypeWarning, reason, "Schedule", msg)
		}
		return ctrl.Result{}, nil
	}
	d, revision, err := r.place(ctx, job, pool)
	if err != nil {
		return ctrl.Result{}, err
	}
	if d.Pod == "" {
		shelljob.SetScheduledCondition(job, now, metav1.ConditionFalse, d.Reason, d.Message)
		return ctrl.Result{RequeueAfter: waitingRecheck}, nil
	}
	job.Status.Pod, job.Status.Revision = d.Pod, revision
	job.Status.PodNamespace = workerNamespace(r.WorkerNamespace, job.Namespace)
	shelljob.SetScheduledCondition(job, now, metav1.ConditionTrue, d.Reason, d.Message)
	controllerutil.AddFinalizer(job, JobFinalizer)
	// The next pass, on this patch's event, starts the command: a placement
	// is recorded before anything runs, so a restart never runs a job on a
	// second worker.
	return ctrl.Result{}, nil
}

// place asks the scheduler where the job goes, under the pool's lock. One
// pass places every queued job of the pool that can go now, in FIFO order
// (scheduler.Schedule), so an older job never gets its worker after a
// newer one; each placement is assumed until the cache shows it, and the
// other placed jobs are woken to record theirs.
func (r *ShellJobReconciler) place(ctx context.Context, job *shellv1alpha1.ShellJob, pool *shellv1alpha1.ShellPool) (scheduler.Decision, string, error) {
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(workerNamespace(r.WorkerNamespace, pool.Namespace)),
		workerLabels(pool)); err != nil {
		return scheduler.Decision{}, "", err
	}
	jobs, err := jobsOfPool(ctx, r.Client, pool.Namespace, pool.Name)
	if err != nil {
		return scheduler.Decision{}, "", err
	}
	workers := make([]scheduler.Worker, 0, len(pods.Items))
	revisions := map[string]string{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if !ownedBy(p, pool) {
			continue
		}
		revisions[p.Name] = p.Labels[shellv1alpha1.LabelRevision]
		workers = append(workers, scheduler.Worker{
			Name:      p.Name,
			Index:     workerIndex(p),
			Revision:  p.Labels[shellv1alpha1.LabelRevision],
			Ready:     podReady(p) && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning,
			SpoolFull: r.workers != nil && r.workers.spoolFull(client.ObjectKeyFromObject(p)),
		})
	}
	byName := make(map[string]*shellv1alpha1.ShellJob, len(jobs)+1)
	for i := range jobs {
		byName[jobs[i].Name] = &jobs[i]
	}
	// The job itself, as this pass sees it (the cache may lag).
	byName[job.Name] = job
	if !slices.ContainsFunc(jobs, func(j shellv1alpha1.ShellJob) bool { return j.UID == job.UID }) {
		jobs = append(jobs, *job)
	}

	assumed, unlock := r.assumed.lock(client.ObjectKeyFromObject(pool))
	defer unlock()
	snapshot := assumed.snapshot(jobs)
	// Placed by an earlier pass, the job records it; the pass still
	// places the others that can go, as a freed worker wakes one job
	// (enqueueHead).
	earlier, placed := assumed.assumed(job.UID)
	var mine scheduler.Decision
	for _, a := range scheduler.Schedule(
		scheduler.Pool{Revision: Revision(pool, r.WorkerImage, r.WorkerSecurity), Replicas: pool.Spec.Replicas, StatefulWorker: pool.Spec.StatefulWorker},
		workers, snapshot) {
		if a.Job == job.Name {
			mine = a.Decision
		}
		other := byName[a.Job]
		if a.Pod == "" || other == nil {
			continue
		}
		assumed.assume(other.UID, a.Decision)
		// Under the pool's lock, so the Events' times keep the order of
		// the placements.
		r.Recorder.Eventf(other, nil, corev1.EventTypeNormal, "Scheduled", "Schedule", "%s", a.Message)
		if other.UID != job.UID && r.wake != nil {
			r.wake(other)
		}
	}
	if placed {
		mine = earlier
	}
	return mine, revisions[mine.Pod], nil
}

// assigned starts the command of a job that has a worker.
func (r *ShellJobReconciler) assigned(ctx context.Context, job *shellv1alpha1.ShellJob, now time.Time) (ctrl.Result, error) {
	key := r.workerKey(job)
	if f, ok := r.facts.get(job.UID); ok && f.Pod == key.Name {
		// The agent knows the job: a Start that a restart kept from being
		// recorded. Starting is idempotent, but the stream already says.
		r.markStarted(job, f.PGID, f.StartedAt, now)
		return r.running(ctx, job, now)
	}
	if shelljob.IsStopRequested(job) {
		return r.stoppedBeforeRun(ctx, job, now)
	}
	pod, err := r.pod(ctx, key)
	if err != nil {
		return ctrl.Result{}, err
	}
	if _, why, lost := workerEnd(pod); lost {
		if r.neverStarted(job) {
			msg := fmt.Sprintf("worker %s %s before the command started; the job is queued again", key.Name, why)
			job.Status.Pod, job.Status.PodNamespace, job.Status.Revision = "", "", ""
			shelljob.SetScheduledCondition(job, now, metav1.ConditionFalse, shellv1alpha1.ShellJobScheduledReasonWorkerLost, msg)
			controllerutil.RemoveFinalizer(job, JobFinalizer)
			r.Recorder.Eventf(job, pod, corev1.EventTypeWarning, shellv1alpha1.ShellJobScheduledReasonWorkerLost, "Schedule", msg)
			return ctrl.Result{}, nil
		}
		return r.workerLost(ctx, job, now, fmt.Sprintf("worker %s %s; whether the command started is unknown, so it is not run again", key.Name, why))
	}
	if job.Spec.Hold {
		// A client clears hold once it put the input files.
		if held := now.Sub(scheduledAt(job)); held < r.HoldTimeout {
			return ctrl.Result{RequeueAfter: r.HoldTimeout - held}, nil
		}
		return r.fail(ctx, job, now, shellv1alpha1.ShellJobFinishedReasonHoldTimedOut,
			fmt.Sprintf("held on worker %s for its input files for more than %v; the client never released it, and the command did not run", key.Name, r.HoldTimeout))
	}
	if !podReady(pod) {
		// The pod's readiness comes with an event of its own.
		return ctrl.Result{}, nil
	}
	if !controllerutil.ContainsFinalizer(job, JobFinalizer) {
		controllerutil.AddFinalizer(job, JobFinalizer)
		return ctrl.Result{}, nil
	}
	return r.start(ctx, job, pod, now)
}

func (r *ShellJobReconciler) start(ctx context.Context, job *shellv1alpha1.ShellJob, pod *corev1.Pod, now time.Time) (ctrl.Result, error) {
	command, err := r.command(ctx, job)
	if err != nil || command == "" {
		// A job gone since the pass read it has no command: its deletion
		// brings the next pass.
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	shell := agentapi.DefaultShell
	pool := &shellv1alpha1.ShellPool{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: shelljob.Pool(job)}, pool); err == nil && pool.Spec.Shell != "" {
		shell = pool.Spec.Shell
	}
	attempts := r.noteStart(job.UID)
	key := client.ObjectKeyFromObject(pod)
	callCtx, cancel := detached(ctx, agentCallTimeout)
	defer cancel()
	resp, err := r.Agent.Start(callCtx, key, agentapi.StartRequest{
		Job:      string(job.UID),
		Command:  command,
		Stateful: shelljob.Mode(job) == shellv1alpha1.ModeStateful,
		Console:  shelljob.Mode(job) == shellv1alpha1.ModeConsole,
		Shell:    shell,
	})
	if err != nil {
		err = fmt.Errorf("start on worker %s: %w", pod.Name, err)
		if attempts < minStartAttempts || now.Sub(scheduledAt(job)) < startDeadline {
			return ctrl.Result{}, err
		}
		job.Status.Phase = shellv1alpha1.PhaseFailed
		job.Status.CompletionTime = ptr.To(metav1.NewTime(now))
		shelljob.SetFinishedCondition(job, now, shellv1alpha1.ShellJobFinishedReasonStartFailed, err.Error())
		r.Recorder.Eventf(job, pod, corev1.EventTypeWarning, shellv1alpha1.ShellJobFinishedReasonStartFailed, "Start", err.Error())
		return r.finished(ctx, job, now, true)
	}
	r.facts.started(client.ObjectKeyFromObject(job), job.UID, pod.Name, resp)
	r.markStarted(job, resp.PGID, resp.StartedAt, now)
	r.Recorder.Eventf(job, pod, corev1.EventTypeNormal, "Started", "Start", "#%d started on %s as process group %d",
		job.Status.Number, pod.Name, resp.PGID)
	return r.running(ctx, job, now)
}

// command reads the job's command from the API server, the one read of it:
// the cache keeps no command (shelljob.Slim). It is "" when the job went,
// or was made again under its name, since the pass read it.
func (r *ShellJobReconciler) command(ctx context.Context, job *shellv1alpha1.ShellJob) (string, error) {
	full := &shellv1alpha1.ShellJob{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(job), full); err != nil {
		return "", fmt.Errorf("read the command of %s: %w", job.Name, err)
	}
	if full.UID != job.UID {
		return "", nil
	}
	return full.Spec.Command, nil
}

func (r *ShellJobReconciler) markStarted(job *shellv1alpha1.ShellJob, pgid int, at, now time.Time) {
	if at.IsZero() {
		at = now
	}
	job.Status.Ran = true
	job.Status.Phase = shellv1alpha1.PhaseRunning
	if pgid != 0 {
		job.Status.PGID = int32(pgid)
	}
	if job.Status.StartTime == nil {
		job.Status.StartTime = ptr.To(metav1.NewTime(at))
	}
}

// running follows a started job: its exit, a lost worker, a stop, or a
// timeout.
func (r *ShellJobReconciler) running(ctx context.Context, job *shellv1alpha1.ShellJob, now time.Time) (ctrl.Result, error) {
	f, known := r.facts.get(job.UID)
	known = known && f.Pod == job.Status.Pod
	if known {
		if job.Status.PGID == 0 && f.PGID != 0 {
			job.Status.PGID = int32(f.PGID)
		}
		switch {
		case f.Lost:
			return r.workerLost(ctx, job, now, fmt.Sprintf("the agent of worker %s restarted while the command ran; its exit status is unknown", f.Pod))
		case f.Unknown:
			return r.workerLost(ctx, job, now, fmt.Sprintf("the agent of worker %s no longer knows the job", f.Pod))
		case f.Exited && f.Shutdown && len(r.sentSignals(job)) == 0:
			return r.shutDown(ctx, job, f, now)
		case f.Exited:
			return r.exited(ctx, job, f, now)
		}
	}
	key := r.workerKey(job)
	pod, err := r.pod(ctx, key)
	if err != nil {
		return ctrl.Result{}, err
	}
	if reason, why, lost := r.workerEnd(ctx, job, pod); lost {
		return r.fail(ctx, job, now, reason, fmt.Sprintf("worker %s %s while the command ran", key.Name, why))
	}

	var recheck time.Duration
	if job.Status.StopReason == "" {
		if job.Spec.Stop || job.DeletionTimestamp != nil {
			job.Status.StopReason = shelljob.RequestedStopReason(job)
		} else if why, next := r.timeout(job, f, known, now); why != "" {
			job.Status.StopReason = shellv1alpha1.StopReasonTimeout
			r.Recorder.Eventf(job, nil, corev1.EventTypeNormal, "Timeout", "Stop", "#%d %s: stopping it", job.Status.Number, why)
		} else {
			recheck = next
		}
	}
	if job.Status.StopReason != "" {
		return r.stop(ctx, job, pod, now)
	}
	return ctrl.Result{RequeueAfter: recheck}, nil
}

// timeout tells whether the job ran past its deadline or sat idle too
// long, and otherwise how soon to look again (0: never). f is what the
// worker's stream reported, if known.
func (r *ShellJobReconciler) timeout(job *shellv1alpha1.ShellJob, f agentFacts, known bool, now time.Time) (string, time.Duration) {
	start := f.StartedAt
	if start.IsZero() && job.Status.StartTime != nil {
		start = job.Status.StartTime.Time
	}
	var next time.Duration
	soonest := func(d time.Duration) {
		if next == 0 || d < next {
			next = d
		}
	}
	if s := job.Spec.ActiveDeadlineSeconds; s != nil {
		end := start.Add(time.Duration(*s) * time.Second)
		if !now.Before(end) {
			return fmt.Sprintf("ran past its deadline of %d s", *s), 0
		}
		soonest(end.Sub(now))
	}
	if s := job.Spec.IdleTimeoutSeconds; s != nil {
		if !known {
			// Only the worker's stream knows when the job last wrote.
			soonest(factsRecheck)
		} else {
			last := f.LastOutput
			if last.IsZero() {
				last = start
			}
			end := last.Add(time.Duration(*s) * time.Second)
			if !now.Before(end) {
				return fmt.Sprintf("wrote no output for %d s", *s), 0
			}
			soonest(end.Sub(now))
		}
	}
	return "", next
}

// stop escalates along agentapi.NextStop: SIGINT at once, SIGTERM a grace
// later, SIGKILL a grace after that, and nothing more once a signal finds
// the group empty. The job ends when the agent reports its exit.
func (r *ShellJobReconciler) stop(ctx context.Context, job *shellv1alpha1.ShellJob, pod *corev1.Pod, now time.Time) (ctrl.Result, error) {
	job.Status.Phase = shellv1alpha1.PhaseStopping
	sent := r.sentSignals(job)
	job.Status.StopSteps = steps(sent)
	sig, _ := agentapi.NextStop("", false)
	if n := len(sent); n > 0 {
		last := sent[n-1]
		prev, _ := agentapi.ParseSignal(string(last.step.Signal))
		var done bool
		if sig, done = agentapi.NextStop(prev, last.step.GroupEmpty); done {
			return ctrl.Result{}, nil
		}
		if due := last.at.Add(r.StopGrace); now.Before(due) {
			return ctrl.Result{RequeueAfter: due.Sub(now)}, nil
		}
	}
	next := shellv1alpha1.Signal(sig.Name())
	callCtx, cancel := detached(ctx, agentCallTimeout)
	defer cancel()
	resp, err := r.Agent.Signal(callCtx, client.ObjectKeyFromObject(pod), string(job.UID), sig)
	if errors.Is(err, agentapi.ErrUnknownJob) {
		return r.workerLost(ctx, job, now, fmt.Sprintf("the agent of worker %s no longer knows the job", pod.Name))
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("send %s on worker %s: %w", next, pod.Name, err)
	}
	s := sentSignal{step: shellv1alpha1.StopStep{Signal: next, Time: metav1.NewTime(now), GroupEmpty: resp.GroupEmpty}, at: now}
	r.noteSignal(job.UID, s)
	metrics.SignalSent(shelljob.Pool(job), string(next))
	job.Status.StopSteps = append(job.Status.StopSteps, s.step)

	msg := fmt.Sprintf("#%d: sent %s to process group %d", job.Status.Number, next, job.Status.PGID)
	if len(sent) == 0 {
		msg = fmt.Sprintf("#%d stopping (%s): sent %s to process group %d", job.Status.Number, job.Status.StopReason, next, job.Status.PGID)
	}
	if resp.GroupEmpty {
		msg += "; the group is empty"
	}
	r.Recorder.Eventf(job, pod, corev1.EventTypeNormal, "Signal", "Stop", msg)
	if _, done := agentapi.NextStop(sig, resp.GroupEmpty); done {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{RequeueAfter: r.StopGrace}, nil
}

// recordExit writes the end the agent reported into the job's status, and
// says it in words ("exit 3").
func recordExit(job *shellv1alpha1.ShellJob, f agentFacts, now time.Time) string {
	at := f.ExitedAt
	if at.IsZero() {
		at = now
	}
	job.Status.CompletionTime = ptr.To(metav1.NewTime(at))
	job.Status.OutputBytes, job.Status.DroppedBytes = f.OutputBytes, f.DroppedBytes
	job.Status.Files = nil
	if f.Files != nil {
		job.Status.Files = &shellv1alpha1.ShellJobFiles{Count: f.Files.Count, Bytes: f.Files.Bytes}
	}
	job.Status.ExitCode = nil
	if f.ExitCode == nil {
		return "exit status unknown"
	}
	job.Status.ExitCode = ptr.To(int32(*f.ExitCode))
	return fmt.Sprintf("exit %d", *f.ExitCode)
}

// exited records the end the agent reported.
func (r *ShellJobReconciler) exited(ctx context.Context, job *shellv1alpha1.ShellJob, f agentFacts, now time.Time) (ctrl.Result, error) {
	exit := recordExit(job, f, now)
	sent := r.sentSignals(job)
	job.Status.StopSteps = steps(sent)
	switch {
	case len(sent) > 0:
		job.Status.Phase = shellv1alpha1.PhaseStopped
		msg := fmt.Sprintf("stopped (%s) after %s: %s", job.Status.StopReason, sent[len(sent)-1].step.Signal, exit)
		shelljob.SetFinishedCondition(job, now, shellv1alpha1.ShellJobFinishedReasonStopped, msg)
		r.Recorder.Eventf(job, nil, corev1.EventTypeNormal, "Stopped", "Finish", "#%d %s", job.Status.Number, msg)
	case f.ExitCode != nil && *f.ExitCode == 0:
		// A stop asked for after the command ended sent nothing.
		job.Status.StopReason = ""
		job.Status.Phase = shellv1alpha1.PhaseSucceeded
		shelljob.SetFinishedCondition(job, now, shellv1alpha1.ShellJobFinishedReasonExited, exit)
		r.Recorder.Eventf(job, nil, corev1.EventTypeNormal, "Succeeded", "Finish", "#%d %s", job.Status.Number, exit)
	case f.OOMKills > 0:
		job.Status.StopReason = ""
		job.Status.Phase = shellv1alpha1.PhaseFailed
		msg := fmt.Sprintf("the command ran out of memory: the out-of-memory killer killed %d of its processes at worker %s's limit of %s; %s",
			f.OOMKills, f.Pod, r.workerMemoryLimit(ctx, job), exit)
		shelljob.SetFinishedCondition(job, now, shellv1alpha1.ShellJobFinishedReasonOutOfMemory, msg)
		r.Recorder.Eventf(job, nil, corev1.EventTypeWarning, shellv1alpha1.ShellJobFinishedReasonOutOfMemory, "Finish", "#%d %s", job.Status.Number, msg)
	default:
		job.Status.StopReason = ""
		job.Status.Phase = shellv1alpha1.PhaseFailed
		shelljob.SetFinishedCondition(job, now, shellv1alpha1.ShellJobFinishedReasonExited, exit)
		r.Recorder.Eventf(job, nil, corev1.EventTypeWarning, "Failed", "Finish", "#%d %s", job.Status.Number, exit)
	}
	return r.finished(ctx, job, now, true)
}

// workerMemoryLimit is the memory limit of the job's worker, for messages.
func (r *ShellJobReconciler) workerMemoryLimit(ctx context.Context, job *shellv1alpha1.ShellJob) string {
	pod, err := r.pod(ctx, r.workerKey(job))
	if err != nil || pod == nil {
		return "unknown"
	}
	return memoryLimit(pod)
}

// stoppedBeforeRun ends a job that was stopped before its command started:
// it never runs.
func (r *ShellJobReconciler) stoppedBeforeRun(ctx context.Context, job *shellv1alpha1.ShellJob, now time.Time) (ctrl.Result, error) {
	if job.Status.StopReason == "" {
		job.Status.StopReason = shelljob.RequestedStopReason(job)
	}
	job.Status.Phase = shellv1alpha1.PhaseStopped
	job.Status.Ran = false
	job.Status.CompletionTime = ptr.To(metav1.NewTime(now))
	msg := fmt.Sprintf("Stopped before it ran (%s)", job.Status.StopReason)
	shelljob.SetFinishedCondition(job, now, shellv1alpha1.ShellJobFinishedReasonStoppedBeforeRun, msg)
	r.Recorder.Eventf(job, nil, corev1.EventTypeNormal, shellv1alpha1.ShellJobFinishedReasonStoppedBeforeRun, "Stop", "#%d %s", job.Status.Number, msg)
	return r.finished(ctx, job, now, true)
}

// workerLost ends a job whose worker went away.
func (r *ShellJobReconciler) workerLost(ctx context.Context, job *shellv1alpha1.ShellJob, now time.Time, msg string) (ctrl.Result, error) {
	return r.fail(ctx, job, now, shellv1alpha1.ShellJobFinishedReasonWorkerLost, msg)
}

// fail ends a job as Failed for reason: its worker went away (lost,
// evicted, out of memory), or it was held too long.
func (r *ShellJobReconciler) fail(ctx context.Context, job *shellv1alpha1.ShellJob, now time.Time, reason, msg string) (ctrl.Result, error) {
	job.Status.Phase = shellv1alpha1.PhaseFailed
	if job.Status.CompletionTime == nil {
		job.Status.CompletionTime = ptr.To(metav1.NewTime(now))
	}
	shelljob.SetFinishedCondition(job, now, reason, msg)
	r.Recorder.Eventf(job, nil, corev1.EventTypeWarning, reason, "Finish", "#%d %s", job.Status.Number, msg)
	return r.finished(ctx, job, now, true)
}

// shutdownSettle is how long after the agent stopped a command on its way
// out the operator waits for the worker pod's status to say why the pod
// ended: the kubelet stops the containers before it reports an eviction.
const shutdownSettle = 15 * time.Second

// shutDown ends a job that the worker's agent stopped because its pod was
// ending: evicted, killed, or deleted. The exit status it reported (143,
// most often) is the agent's doing, so the job ends for the pod's reason.
func (r *ShellJobReconciler) shutDown(ctx context.Context, job *shellv1alpha1.ShellJob, f agentFacts, now time.Time) (ctrl.Result, error) {
	key := r.workerKey(job)
	pod, err := r.pod(ctx, key)
	if err != nil {
		return ctrl.Result{}, err
	}
	reason, why, ended := r.workerEnd(ctx, job, pod)
	// The agent stopped the command in order, so the container was not
	// killed out of memory: under cgroup v1 an earlier kill of one process
	// marks the container OOMKilled all the same.
	if !ended || reason == shellv1alpha1.ShellJobFinishedReasonOutOfMemory {
		if wait := f.ExitedAt.Add(shutdownSettle).Sub(now); wait > 0 {
			return ctrl.Result{RequeueAfter: min(wait, time.Second)}, nil
		}
		reason, why = shellv1alpha1.ShellJobFinishedReasonWorkerLost, "shut down"
	}
	recordExit(job, f, now)
	return r.fail(ctx, job, now, reason, fmt.Sprintf("worker %s %s while the command ran; its agent stopped the command", key.Name, why))
}

// finished lets an ended job go: it removes the finalizer, and deletes the
// job once its TTL has run out: spec.ttlSecondsAfterFinished, else JobTTL,
// counted as shelljob.Expiry says. A job that ended in this pass is deleted
// in a later one, once its end is recorded.
func (r *ShellJobReconciler) finished(ctx context.Context, job *shellv1alpha1.ShellJob, now time.Time, justEnded bool) (ctrl.Result, error) {
	controllerutil.RemoveFinalizer(job, JobFinalizer)
	if _, delivered := shelljob.Delivered(job); delivered {
		if err := r.tellDelivered(ctx, job); err != nil {
			return ctrl.Result{}, err
		}
	}
	ttl := r.JobTTL
	if s := job.Spec.TTLSecondsAfterFinished; s != nil {
		ttl = time.Duration(*s) * time.Second
	}
	expiry, ok := shelljob.Expiry(job, ttl, r.DeliveryGrace)
	if ttl < 0 || !ok || job.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	if justEnded || now.Before(expiry) {
		return ctrl.Result{RequeueAfter: max(expiry.Sub(now), time.Millisecond)}, nil
	}
	// Nobody reads its spool once it is gone.
	if err := r.tellDelivered(ctx, job); err != nil {
		return ctrl.Result{}, err
	}
	// Only the version this pass read: a delivery mark set since moves the
	// expiry.
	err := r.Client.Delete(ctx, job, client.Preconditions{UID: &job.UID, ResourceVersion: &job.ResourceVersion})
	if apierrors.IsConflict(err) {
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	}
	return ctrl.Result{}, client.IgnoreNotFound(err)
}

// tellDelivered tells the agent of a finished job's worker, once, that
// nobody needs the job's spool any more (it was delivered, or it is being
// deleted): the spool may go once the worker needs room (agent/budget.go).
// A worker that is gone or going takes its spools with it, and an agent
// older than the call is not asked again.
func (r *ShellJobReconciler) tellDelivered(ctx context.Context, job *shellv1alpha1.ShellJob) error {
	if job.Status.Pod == "" {
		return nil
	}
	key, name := r.workerKey(job), client.ObjectKeyFromObject(job)
	r.mu.Lock()
	done := r.told[name] == job.UID || r.noDelivered[key]
	r.mu.Unlock()
	if done {
		return nil
	}
	pod, err := r.pod(ctx, key)
	if err != nil || pod == nil || pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning {
		return err
	}
	callCtx, cancel := detached(ctx, agentCallTimeout)
	defer cancel()
	err = r.Agent.Delivered(callCtx, key, string(job.UID))
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case errors.Is(err, agentapi.ErrUsage):
		r.noDelivered[key] = true
		ctrl.LoggerFrom(ctx).V(1).Info("The worker's agent predates delivery marks; its spools go by age alone", "pod", key)
	case err != nil:
		return fmt.Errorf("tell worker %s that #%d is delivered: %w", key.Name, job.Status.Number, err)
	default:
		r.told[name] = job.UID
	}
	return nil
}

// workerKey is the key of the job's worker pod.
func (r *ShellJobReconciler) workerKey(job *shellv1alpha1.ShellJob) types.NamespacedName {
	return types.NamespacedName{Namespace: workerNamespace(r.WorkerNamespace, job.Namespace), Name: job.Status.Pod}
}

// pod gets a worker pod from the cache, nil if there is none.
func (r *ShellJobReconciler) pod(ctx context.Context, key types.NamespacedName) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	if err := r.Client.Get(ctx, key, pod); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return pod, nil
}

// workerEnd tells whether a worker pod is gone or going, and how: the
// Finished reason of a job that ran there, and what happened to the pod.
func workerEnd(pod *corev1.Pod) (reason, why string, ended bool) {
	if pod == nil {
		return shellv1alpha1.ShellJobFinishedReasonWorkerLost, "was deleted", true
	}
	if msg := evicted(pod); msg != "" {
		return wasEvicted(msg)
	}
	switch {
	case oomKilled(pod):
		return shellv1alpha1.ShellJobFinishedReasonOutOfMemory, "was killed out of memory, at its limit of " + memoryLimit(pod), true
	case pod.DeletionTimestamp != nil:
		return shellv1alpha1.ShellJobFinishedReasonWorkerLost, "was deleted", true
	case pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded:
		return shellv1alpha1.ShellJobFinishedReasonWorkerLost, "ended (" + podEndReason(pod) + ")", true
	}
	return "", "", false
}

// workerEnd is workerEnd, and the kubelet's Evicted Event of the job's
// worker when the pod does not show it: the pool replaces a failed worker
// at once, and the kubelet may report the pod failed before it says why.
func (r *ShellJobReconciler) workerEnd(ctx context.Context, job *shellv1alpha1.ShellJob, pod *corev1.Pod) (reason, why string, ended bool) {
	reason, why, ended = workerEnd(pod)
	if reason == shellv1alpha1.ShellJobFinishedReasonWorkerEvicted || (!ended && pod != nil) {
		return reason, why, ended
	}
	key := r.workerKey(job)
	var events corev1.EventList
	err := r.APIReader.List(ctx, &events, client.InNamespace(key.Namespace),
		client.MatchingFields{"involvedObject.name": key.Name, "reason": "Evicted"})
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Could not list the worker's Events to tell an eviction", "pod", key.Name)
		return reason, why, ended
	}
	since := scheduledAt(job).Add(-time.Second)
	for _, e := range events.Items {
		if e.InvolvedObject.Kind == "Pod" && !eventTime(e).Before(since) {
			return wasEvicted(e.Message)
		}
	}
	return reason, why, ended
}

// eventTime is when a core Event last happened.
func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// wasEvicted is workerEnd's answer for a pod evicted with message msg.
func wasEvicted(msg string) (reason, why string, ended bool) {
	return shellv1alpha1.ShellJobFinishedReasonWorkerEvicted, "was evicted (" + clause(msg) + ")", true
}

// clause is a message as a part of a sentence: no final period.
func clause(msg string) string { return strings.TrimSuffix(strings.TrimSpace(msg), ".") }

// evicted is why the pod was evicted, or "" if it was not: the kubelet's
// message (a full spool, node pressure), or the disruption's.
func evicted(pod *corev1.Pod) string {
	if pod.Status.Reason == "Evicted" {
		return cmp.Or(pod.Status.Message, "Evicted")
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			return cmp.Or(c.Message, c.Reason)
		}
	}
	return ""
}

// oomKilled tells whether the kernel killed the worker's container out of
// memory, as cgroup v2 does to a whole container at its limit.
func oomKilled(pod *corev1.Pod) bool {
	for _, c := range pod.Status.ContainerStatuses {
		if t := c.State.Terminated; t != nil && t.Reason == "OOMKilled" {
			return true
		}
	}
	return false
}

// memoryLimit is the worker container's memory limit, "none" if unset.
func memoryLimit(pod *corev1.Pod) string {
	for _, c := range pod.Spec.Containers {
		if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok && c.Name == agentapi.WorkerContainer {
			return q.String()
		}
	}
	return "none"
}

// scheduledAt is when the job got its worker.
func scheduledAt(job *shellv1alpha1.ShellJob) time.Time {
	if c := meta.FindStatusCondition(job.Status.Conditions, shellv1alpha1.ShellJobScheduled); c != nil {
		return c.LastTransitionTime.Time
	}
	return job.CreationTimestamp.Time
}

// neverStarted tells whether this process knows that the job's command was
// never started: it placed the job itself and never called Start for it.
func (r *ShellJobReconciler) neverStarted(job *shellv1alpha1.ShellJob) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return scheduledAt(job).After(r.bootTime) && r.starts[job.UID] == 0
}

func (r *ShellJobReconciler) noteStart(uid types.UID) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.starts[uid]++
	return r.starts[uid]
}

// sentSignals are the signals sent to the job's group: this process's
// record when it has one at least as long as the status's, since it holds
// exact times and may be ahead of a stale cache.
func (r *ShellJobReconciler) sentSignals(job *shellv1alpha1.ShellJob) []sentSignal {
	r.mu.Lock()
	mem := r.stops[job.UID]
	r.mu.Unlock()
	if len(mem) >= len(job.Status.StopSteps) {
		return slices.Clone(mem)
	}
	out := make([]sentSignal, 0, len(job.Status.StopSteps))
	for _, s := range job.Status.StopSteps {
		out = append(out, sentSignal{step: s, at: s.Time.Time})
	}
	return out
}

func (r *ShellJobReconciler) noteSignal(uid types.UID, s sentSignal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stops[uid] = append(r.stops[uid], s)
}

func steps(sent []sentSignal) []shellv1alpha1.StopStep {
	if len(sent) == 0 {
		return nil
	}
	out := make([]shellv1alpha1.StopStep, len(sent))
	for i, s := range sent {
		out[i] = s.step
	}
	return out
}

// track records the UID of the job of that name. A job of the same name
// that was deleted and made again before a pass found it gone is
// forgotten.
func (r *ShellJobReconciler) track(key types.NamespacedName, uid types.UID) {
	r.mu.Lock()
	old, ok := r.uids[key]
	r.uids[key] = uid
	r.mu.Unlock()
	if ok && old != uid {
		r.forgetUID(old)
	}
}

// gone drops what this process holds of a job that was deleted, whatever
// its phase: one deleted past its finalizer never reached its end here.
func (r *ShellJobReconciler) gone(key types.NamespacedName) {
	r.mu.Lock()
	uid, ok := r.uids[key]
	delete(r.uids, key)
	r.mu.Unlock()
	if ok {
		r.forgetUID(uid)
	}
	// Reports of a job that went before any pass saw it.
	r.facts.forgetJob(key)
	r.mu.Lock()
	delete(r.told, key)
	r.mu.Unlock()
}

// forget drops what this process holds of an ended job.
func (r *ShellJobReconciler) forget(key types.NamespacedName, uid types.UID) {
	r.mu.Lock()
	if r.uids[key] == uid {
		delete(r.uids, key)
	}
	r.mu.Unlock()
	r.forgetUID(uid)
}

func (r *ShellJobReconciler) forgetUID(uid types.UID) {
	r.mu.Lock()
	delete(r.starts, uid)
	delete(r.stops, uid)
	delete(r.placedAt, uid)
	r.mu.Unlock()
	r.facts.forget(uid)
	r.numbers.forget(uid)
}

// SetupWithManager wires the job controller: jobs, the worker pods they
// run on, their pools, and the agents' reports sent on reports.
func (r *ShellJobReconciler) SetupWithManager(mgr ctrl.Manager, reports <-chan event.TypedGenericEvent[*shellv1alpha1.ShellJob]) error {
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
	if r.WorkerImage == "" {
		r.WorkerImage = DefaultWorkerImage
	}
	if r.MaxConcurrentReconciles == 0 {
		r.MaxConcurrentReconciles = 16
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.assumed == nil {
		r.assumed = newAssumptions()
	}
	if r.facts == nil {
		r.facts = newFactStore()
	}
	r.numbers = newNumberer(r.APIReader, r.Client, r.Client)
	r.writes = newWrites()
	r.bootTime = r.Clock.Now()
	r.uids = map[types.NamespacedName]types.UID{}
	r.starts = map[types.UID]int{}
	r.stops = map[types.UID][]sentSignal{}
	r.placedAt = map[types.UID]time.Time{}
	r.told = map[types.NamespacedName]types.UID{}
	r.noDelivered = map[types.NamespacedName]bool{}

	b := ctrl.NewControllerManagedBy(mgr).
		For(&shellv1alpha1.ShellJob{}).
		Watches(&shellv1alpha1.ShellJob{}, handler.Funcs{
			UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				old, cur := e.ObjectOld.(*shellv1alpha1.ShellJob), e.ObjectNew.(*shellv1alpha1.ShellJob)
				if old.Status.Pod != "" && (shelljob.IsFinished(cur) || cur.Status.Pod != old.Status.Pod) {
					r.enqueueHead(ctx, q, cur.Namespace, shelljob.Pool(cur))
				}
			},
			DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				if j, ok := e.Object.(*shellv1alpha1.ShellJob); ok && j.Status.Pod != "" {
					r.enqueueHead(ctx, q, j.Namespace, shelljob.Pool(j))
					if shelljob.IsFinished(j) {
						// Deleted by someone else than its TTL: nobody can
						// read its spool any more.
						go func() {
							if err := r.tellDelivered(context.WithoutCancel(ctx), j); err != nil {
								ctrl.LoggerFrom(ctx).V(1).Info("Could not tell a worker a deleted job's spool may go", "err", err.Error())
							}
							r.mu.Lock()
							delete(r.told, client.ObjectKeyFromObject(j))
							r.mu.Unlock()
						}()
					}
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
			CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				r.enqueueWaiting(ctx, q, e.Object.GetNamespace(), e.Object.GetName())
			},
			UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				if e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() {
					r.enqueueWaiting(ctx, q, e.ObjectNew.GetNamespace(), e.ObjectNew.GetName())
				}
			},
		})
	wakes := make(chan event.TypedGenericEvent[*shellv1alpha1.ShellJob], 1024)
	r.wake = func(j *shellv1alpha1.ShellJob) {
		select {
		case wakes <- event.TypedGenericEvent[*shellv1alpha1.ShellJob]{Object: j.DeepCopy()}:
		default:
			// Full: the job's own periodic look (waitingRecheck) records it.
		}
	}
	b = b.WatchesRawSource(source.Channel(wakes, &handler.TypedEnqueueRequestForObject[*shellv1alpha1.ShellJob]{}))
	if reports != nil {
		b = b.WatchesRawSource(source.Channel(reports, &handler.TypedEnqueueRequestForObject[*shellv1alpha1.ShellJob]{}))
	}
	return b.WithOptions(controller.Options{MaxConcurrentReconciles: r.MaxConcurrentReconciles}).
		Named("shelljob").
		Complete(r)
}

// enqueueForPod wakes the jobs on a worker pod, and the pool's waiting jobs
// when the pod may have become ready.
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
	r.enqueueWaiting(ctx, q, pool.Namespace, pool.Name)
}

// enqueueHead wakes the oldest of the pool's jobs that wait for a worker,
// when a job freed one: one pass places every job that can go (place),
// so that a worker freed under a long queue costs a few passes, not one
// for each job of the queue. It wakes one more than the pool has
// workers: the cache may still show queued a job that an earlier pass
// placed, whose pass then starts it rather than place the others, and
// there are at most as many such jobs as workers.
func (r *ShellJobReconciler) enqueueHead(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], ns, pool string) {
	p := &shellv1alpha1.ShellPool{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: pool}, p); err != nil {
		r.enqueueWaiting(ctx, q, ns, pool)
		return
	}
	jobs, err := jobsOfPool(ctx, r.Client, ns, pool)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "List the jobs of a pool", "pool", pool)
		return
	}
	waiting := make([]scheduler.Job, 0, len(jobs))
	for i := range jobs {
		if j := &jobs[i]; j.Status.Pod == "" && !shelljob.IsStopRequested(j) {
			waiting = append(waiting, scheduler.Job{Name: j.Name, Created: j.CreationTimestamp.Time})
		}
	}
	slices.SortFunc(waiting, scheduler.Compare)
	for _, j := range waiting[:min(len(waiting), int(p.Spec.Replicas)+1)] {
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: j.Name}})
	}
}

// enqueueWaiting wakes the pool's jobs that wait for a worker.
func (r *ShellJobReconciler) enqueueWaiting(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], ns, pool string) {
	jobs, err := jobsOfPool(ctx, r.Client, ns, pool)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "List the jobs of a pool", "pool", pool)
		return
	}
	for _, j := range jobs {
		if j.Status.Pod == "" {
			q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&j)})
		}
	}
}
