package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/shelljob"
	"shelljob.dev/shelljob/internal/texts"
)

// The approval of a job whose pool requires one: it waits, unplaced, until
// someone approves it, and ends without running when denied or not decided
// in time. internal/shelljob decides (Approval); the placement, which sees
// the same decision, places no job that waits for one.

// approval takes a queued job's pass while its pool's approval holds it
// back, or ends it, and tells whether it did; an approved job, or one of a
// pool that requires none, goes on to the placement.
func (r *ShellJobReconciler) approval(ctx context.Context, job *shellv1alpha1.ShellJob, now time.Time) (ctrl.Result, bool, error) {
	pool := &shellv1alpha1.ShellPool{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: shelljob.Pool(job)}, pool); err != nil {
		// A missing pool is the placement's to tell (PoolNotFound).
		return ctrl.Result{}, false, client.IgnoreNotFound(err)
	}
	state, deadline := shelljob.Approval(job, pool.Spec.Approval, now)
	switch state {
	case shelljob.NoApprovalNeeded:
		if c := meta.FindStatusCondition(job.Status.Conditions, shellv1alpha1.ShellJobApproved); c != nil &&
			c.Reason == shellv1alpha1.ShellJobApprovedReasonAwaitingApproval {
			// The pool no longer requires approval: the job waits for
			// nothing but a worker.
			meta.RemoveStatusCondition(&job.Status.Conditions, shellv1alpha1.ShellJobApproved)
			job.Status.Phase = shellv1alpha1.PhaseQueued
		}
		return ctrl.Result{}, false, nil
	case shelljob.ApprovalGranted:
		by := job.Spec.Approval.By
		if shelljob.SetApprovedCondition(job, now, metav1.ConditionTrue, shellv1alpha1.ShellJobApprovedReasonApproved, texts.Approved(by)) {
			r.Recorder.Eventf(job, nil, corev1.EventTypeNormal, "Approved", "Approve", "#%d %s", job.Status.Number, texts.Approved(by))
		}
		job.Status.Phase = shellv1alpha1.PhaseQueued
		return ctrl.Result{}, false, nil
	case shelljob.ApprovalDenied:
		res, err := r.notApproved(ctx, job, now, shellv1alpha1.PhaseDenied, shellv1alpha1.ShellJobFinishedReasonDenied,
			texts.Denied(job.Spec.Approval.By))
		return res, true, err
	case shelljob.ApprovalExpired:
		res, err := r.notApproved(ctx, job, now, shellv1alpha1.PhaseExpired, shellv1alpha1.ShellJobFinishedReasonApprovalExpired,
			texts.NotApprovedWithin(shelljob.ApprovalTimeout(pool.Spec.Approval)))
		return res, true, err
	}
	job.Status.Phase = shellv1alpha1.PhaseAwaitingApproval
	msg := texts.AwaitingApproval(pool.Name, deadline)
	if shelljob.SetApprovedCondition(job, now, metav1.ConditionFalse, shellv1alpha1.ShellJobApprovedReasonAwaitingApproval, msg) {
		r.Recorder.Eventf(job, nil, corev1.EventTypeNormal, shellv1alpha1.ShellJobApprovedReasonAwaitingApproval, "Approve", "#%d %s", job.Status.Number, msg)
	}
	shelljob.SetScheduledCondition(job, now, metav1.ConditionFalse, shellv1alpha1.ShellJobScheduledReasonAwaitingApproval,
		fmt.Sprintf("waiting for approval on pool %s", pool.Name))
	return ctrl.Result{RequeueAfter: deadline.Sub(now)}, true, nil
}

// notApproved ends a job that was denied, or not decided in time: it never
// runs.
func (r *ShellJobReconciler) notApproved(ctx context.Context, job *shellv1alpha1.ShellJob, now time.Time, phase shellv1alpha1.ShellJobPhase, reason, msg string) (ctrl.Result, error) {
	job.Status.Phase = phase
	job.Status.Ran = false
	job.Status.CompletionTime = ptr.To(metav1.NewTime(now))
	shelljob.SetApprovedCondition(job, now, metav1.ConditionFalse, reason, msg)
	shelljob.SetFinishedCondition(job, now, reason, msg)
	r.Recorder.Eventf(job, nil, corev1.EventTypeNormal, reason, "Approve", "#%d %s; it never ran", job.Status.Number, msg)
	return r.finished(ctx, job, now, true)
}
