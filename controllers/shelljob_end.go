package controllers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/shelljob"
)

// The end of a job: its command exited, its worker went away, or it was
// held too long; then, once it ended, its TTL. How each ends is decided in
// internal/shelljob (SetExited, WorkerEnd, ShutdownEnd).

// exited records the end the agent reported.
func (r *ShellJobReconciler) exited(ctx context.Context, job *shellv1alpha1.ShellJob, f agentFacts, now time.Time) (ctrl.Result, error) {
	job.Status.StopSteps = steps(r.sentSignals(job))
	limit := ""
	if f.OOMKills > 0 {
		limit = r.workerMemoryLimit(ctx, job)
	}
	ev := shelljob.SetExited(job, exitOf(f), limit, now)
	r.Recorder.Eventf(job, nil, ev.Type, ev.Reason, "Finish", "#%d %s", job.Status.Number, ev.Note)
	return r.finished(ctx, job, now, true)
}

// exitOf is the exit the agent reported, with the largest output counts
// of all its reports.
func exitOf(f agentFacts) shelljob.Exit {
	return shelljob.ExitOf(f.Pod, agentapi.Event{ExitCode: f.ExitCode, Time: f.ExitedAt, OutputBytes: f.OutputBytes,
		DroppedBytes: f.DroppedBytes, OOMKills: f.OOMKills, Files: f.Files})
}

// workerMemoryLimit is the memory limit of the job's worker, for messages.
func (r *ShellJobReconciler) workerMemoryLimit(ctx context.Context, job *shellv1alpha1.ShellJob) string {
	pod, err := r.pod(ctx, r.workerKey(job))
	if err != nil || pod == nil {
		return "unknown"
	}
	return shelljob.MemoryLimit(pod)
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

// shutDown ends a job that the worker's agent stopped because its pod was
// ending: evicted, killed, or deleted. The exit status it reported (143,
// most often) is the agent's doing, so the job ends for the pod's reason
// (shelljob.ShutdownEnd).
func (r *ShellJobReconciler) shutDown(ctx context.Context, job *shellv1alpha1.ShellJob, f agentFacts, now time.Time) (ctrl.Result, error) {
	key := r.workerKey(job)
	pod, err := r.pod(ctx, key)
	if err != nil {
		return ctrl.Result{}, err
	}
	reason, why, ended := r.workerEnd(ctx, job, pod)
	reason, why, wait := shelljob.ShutdownEnd(reason, why, ended, f.ExitedAt, now)
	if wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	shelljob.RecordExit(job, exitOf(f), now)
	return r.fail(ctx, job, now, reason, fmt.Sprintf("worker %s %s while the command ran; its agent stopped the command", key.Name, why))
}

// finished lets an ended job go: it removes the finalizer, and deletes the
// job once its TTL has run out: spec.ttlSecondsAfterFinished, else JobTTL,
// counted as shelljob.Expiry says. A job that ended in this pass is deleted
// in a later one, once its end is recorded. A job that nothing waits for
// settles instead (shelljob.Settles): it leaves the cache with this pass's
// write, and the sweep of settled jobs deletes it (settledSweep).
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
	if expiry, ok := shelljob.Settles(job, now, ttl, r.DeliveryGrace); ok {
		shelljob.Settle(job, expiry)
		return ctrl.Result{}, nil
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
	if r.told.done(name, job.UID, key) {
		return nil
	}
	pod, err := r.pod(ctx, key)
	if err != nil || pod == nil || pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning {
		return err
	}
	callCtx, cancel := detached(ctx, agentCallTimeout)
	defer cancel()
	err = r.Agent.Delivered(callCtx, key, string(job.UID))
	switch {
	case errors.Is(err, agentapi.ErrUsage):
		r.told.predates(key)
		ctrl.LoggerFrom(ctx).V(1).Info("The worker's agent predates delivery marks; its spools go by age alone", "pod", key)
	case err != nil:
		return fmt.Errorf("tell worker %s that #%d is delivered: %w", key.Name, job.Status.Number, err)
	default:
		r.told.told(name, job.UID)
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

// workerEnd is shelljob.WorkerEnd, and the kubelet's Evicted Event of the
// job's worker when the pod does not show it: the pool replaces a failed
// worker at once, and the kubelet may report the pod failed before it
// says why.
func (r *ShellJobReconciler) workerEnd(ctx context.Context, job *shellv1alpha1.ShellJob, pod *corev1.Pod) (reason, why string, ended bool) {
	reason, why, ended = shelljob.WorkerEnd(pod)
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
			return shelljob.WasEvicted(e.Message)
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

// spoolNotices remembers, by name, the finished jobs whose worker was told
// that nobody needs their spool any more (tellDelivered), until they are
// deleted; and the workers whose agent is older than that call, which are
// not asked again.
type spoolNotices struct {
	mu   sync.Mutex
	jobs map[types.NamespacedName]types.UID
	old  map[types.NamespacedName]bool
}

func newSpoolNotices() *spoolNotices {
	return &spoolNotices{jobs: map[types.NamespacedName]types.UID{}, old: map[types.NamespacedName]bool{}}
}

// done tells whether the job's worker was told, or need not be.
func (n *spoolNotices) done(job types.NamespacedName, uid types.UID, worker types.NamespacedName) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.jobs[job] == uid || n.old[worker]
}

func (n *spoolNotices) told(job types.NamespacedName, uid types.UID) {
	n.mu.Lock()
	n.jobs[job] = uid
	n.mu.Unlock()
}

// predates records a worker whose agent predates the call.
func (n *spoolNotices) predates(worker types.NamespacedName) {
	n.mu.Lock()
	n.old[worker] = true
	n.mu.Unlock()
}

// forget drops a job that was deleted.
func (n *spoolNotices) forget(job types.NamespacedName) {
	n.mu.Lock()
	delete(n.jobs, job)
	n.mu.Unlock()
}
