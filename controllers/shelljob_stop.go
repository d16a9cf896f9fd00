package controllers

import (
	"context"
	"errors"
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
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/metrics"
	"shelljob.dev/shelljob/internal/shelljob"
)

// The stop of a job: a running job is stopped when a client asks, when it
// is deleted, or when it times out (shelljob.Timeout); a queued one never
// runs.

// running follows a started job: its exit, a lost worker, a stop, or a
// timeout.
func (r *ShellJobReconciler) running(ctx context.Context, job *shellv1alpha1.ShellJob, now time.Time) (ctrl.Result, error) {
	f, known := r.memory.facts(client.ObjectKeyFromObject(job), job.UID)
	known = known && f.Pod == job.Status.Pod
	if job.Status.StopReason == "" {
		// The write of a stop's first step conflicted: its reason is here.
		job.Status.StopReason = r.memory.stopReason(client.ObjectKeyFromObject(job), job.UID)
	}
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
		} else if why, next := shelljob.Timeout(job, shelljob.Activity{Reported: known, StartedAt: f.StartedAt, LastOutput: f.LastOutput}, now); why != "" {
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
	s := sentSignal{step: shellv1alpha1.StopStep{Signal: next, Time: metav1.NewTime(now), GroupEmpty: resp.GroupEmpty}, at: now,
		reason: job.Status.StopReason}
	r.memory.noteSignal(client.ObjectKeyFromObject(job), job.UID, s)
	metrics.SignalSent(shelljob.Pool(job), string(next))
	job.Status.StopSteps = append(job.Status.StopSteps, s.step)

	msg := fmt.Sprintf("#%d: sent %s to process group %d", job.Status.Number, next, job.Status.PGID)
	if len(sent) == 0 {
		msg = fmt.Sprintf("#%d stopping%s (%s): sent %s to process group %d", job.Status.Number, shelljob.ByStopper(job),
			job.Status.StopReason, next, job.Status.PGID)
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

// stoppedBeforeRun ends a job that was stopped before its command started:
// it never runs.
func (r *ShellJobReconciler) stoppedBeforeRun(ctx context.Context, job *shellv1alpha1.ShellJob, now time.Time) (ctrl.Result, error) {
	if job.Status.StopReason == "" {
		job.Status.StopReason = shelljob.RequestedStopReason(job)
	}
	job.Status.Phase = shellv1alpha1.PhaseStopped
	job.Status.Ran = false
	job.Status.CompletionTime = ptr.To(metav1.NewTime(now))
	if c := meta.FindStatusCondition(job.Status.Conditions, shellv1alpha1.ShellJobApproved); c != nil &&
		c.Reason == shellv1alpha1.ShellJobApprovedReasonAwaitingApproval {
		// It awaits nothing any more.
		meta.RemoveStatusCondition(&job.Status.Conditions, shellv1alpha1.ShellJobApproved)
	}
	msg := fmt.Sprintf("Stopped%s before it ran (%s)", shelljob.ByStopper(job), job.Status.StopReason)
	shelljob.SetFinishedCondition(job, now, shellv1alpha1.ShellJobFinishedReasonStoppedBeforeRun, msg)
	r.Recorder.Eventf(job, nil, corev1.EventTypeNormal, shellv1alpha1.ShellJobFinishedReasonStoppedBeforeRun, "Stop", "#%d %s", job.Status.Number, msg)
	return r.finished(ctx, job, now, true)
}

// sentSignals are the signals sent to the job's group: this process's
// record when it has one at least as long as the status's, since it holds
// exact times and may be ahead of a stale cache; the agent's, told with the
// job's exit, when it is longer than both, as when an operator died between
// a signal and its record.
func (r *ShellJobReconciler) sentSignals(job *shellv1alpha1.ShellJob) []sentSignal {
	key := client.ObjectKeyFromObject(job)
	sent := r.memory.signals(key, job.UID)
	if len(sent) < len(job.Status.StopSteps) {
		sent = make([]sentSignal, 0, len(job.Status.StopSteps))
		for _, s := range job.Status.StopSteps {
			sent = append(sent, sentSignal{step: s, at: s.Time.Time})
		}
	}
	if f, known := r.memory.facts(key, job.UID); known && f.Pod == job.Status.Pod && len(f.Signals) > len(sent) {
		sent = make([]sentSignal, 0, len(f.Signals))
		for _, s := range f.Signals {
			at := metav1.NewTime(s.Time)
			sent = append(sent, sentSignal{step: shellv1alpha1.StopStep{Signal: shellv1alpha1.Signal(s.Signal.Name()), Time: at}, at: s.Time})
		}
	}
	return sent
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

// killOrphan kills at once the command of a job that is gone: there is no
// object left to record a stop's steps or its end.
func (r *ShellJobReconciler) killOrphan(ctx context.Context, key types.NamespacedName, uid types.UID, pod string) error {
	worker := types.NamespacedName{Namespace: workerNamespace(r.WorkerNamespace, key.Namespace), Name: pod}
	if p, err := r.pod(ctx, worker); err != nil || p == nil {
		// A worker that is gone took the command with it.
		return err
	}
	callCtx, cancel := detached(ctx, agentCallTimeout)
	defer cancel()
	_, err := r.Agent.Signal(callCtx, worker, string(uid), agentapi.SIGKILL)
	if err != nil && !errors.Is(err, agentapi.ErrUnknownJob) {
		return fmt.Errorf("kill the command of deleted job %s on worker %s: %w", key.Name, pod, err)
	}
	ctrl.LoggerFrom(ctx).Info("Killed the command of a job deleted while it ran", "pod", worker, "uid", uid)
	return nil
}
