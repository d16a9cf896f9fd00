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
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/shelljob"
)

// The start of a job: queued until the placement gives it a worker, then
// assigned until its command starts there.

const (
	// startDeadline is how long Start may keep failing, counted from the
	// placement, before the job fails with StartFailed; the workqueue's
	// backoff spaces the attempts.
	startDeadline = 30 * time.Second
	// minStartAttempts is how many Starts this process makes before it
	// gives up, whatever the deadline says: a restarted operator tries
	// again before it fails a job.
	minStartAttempts = 3
)

// queued hands a job that waits for a worker to the placement, and
// records its decision: the worker the job got, or why it waits.
func (r *ShellJobReconciler) queued(ctx context.Context, job *shellv1alpha1.ShellJob, now time.Time) (ctrl.Result, error) {
	if shelljob.IsStopRequested(job) {
		return r.stoppedBeforeRun(ctx, job, now)
	}
	if res, held, err := r.approval(ctx, job, now); held || err != nil {
		return res, err
	}
	r.queues.AddOrUpdate(job.DeepCopy())
	d, ok := r.placement.decision(ctx, job)
	if !ok {
		// The decision, when it comes, brings another pass.
		return ctrl.Result{}, nil
	}
	switch {
	case d.Reason == shellv1alpha1.ShellJobScheduledReasonPoolNotFound,
		d.Reason == shellv1alpha1.ShellJobScheduledReasonServiceAccountNotAllowed:
		if shelljob.SetScheduledCondition(job, now, metav1.ConditionFalse, d.Reason, d.Message) {
			r.Recorder.Eventf(job, nil, corev1.EventTypeWarning, d.Reason, "Schedule", d.Message)
		}
		return ctrl.Result{}, nil
	case d.Pod == "":
		shelljob.SetScheduledCondition(job, now, metav1.ConditionFalse, d.Reason, d.Message)
		return ctrl.Result{}, nil
	}
	job.Status.Pod, job.Status.Revision = d.Pod, d.Revision
	job.Status.PodNamespace = workerNamespace(r.WorkerNamespace, job.Namespace)
	shelljob.SetScheduledCondition(job, now, metav1.ConditionTrue, d.Reason, d.Message)
	// Reconcile records the placement, then starts the command.
	return ctrl.Result{}, nil
}

// assigned starts the command of a job that has a worker; command reads
// it.
func (r *ShellJobReconciler) assigned(ctx context.Context, job *shellv1alpha1.ShellJob, now time.Time, command func() (string, error)) (ctrl.Result, error) {
	key := r.workerKey(job)
	if f, ok := r.memory.facts(client.ObjectKeyFromObject(job), job.UID); ok && f.Pod == key.Name {
		// The agent knows the job: a Start that a restart kept from being
		// recorded, or whose write after the Start conflicted. Starting is
		// idempotent, but the stream already says. The finalizer that
		// write carried goes on with the status, as it does there.
		if job.DeletionTimestamp == nil {
			controllerutil.AddFinalizer(job, JobFinalizer)
		}
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
	if _, why, lost := shelljob.WorkerEnd(pod); lost {
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
	return r.start(ctx, job, pod, now, command)
}

func (r *ShellJobReconciler) start(ctx context.Context, job *shellv1alpha1.ShellJob, pod *corev1.Pod, now time.Time, read func() (string, error)) (ctrl.Result, error) {
	command, err := read()
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
	attempts := r.memory.noteStart(client.ObjectKeyFromObject(job), job.UID)
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
	r.memory.started(client.ObjectKeyFromObject(job), job.UID, pod.Name, resp)
	r.markStarted(job, resp.PGID, resp.StartedAt, now)
	r.Recorder.Eventf(job, pod, corev1.EventTypeNormal, "Started", "Start", "#%d started on %s as process group %d",
		job.Status.Number, pod.Name, resp.PGID)
	return r.running(ctx, job, now)
}

// command reads the job's command from the API server, the one read of it:
// the cache keeps no command (shelljob.Slim). It is "" when the job went,
// or was made again under its name, since the pass read it.
func (r *ShellJobReconciler) command(ctx context.Context, key types.NamespacedName, uid types.UID) (string, error) {
	full := &shellv1alpha1.ShellJob{}
	if err := r.APIReader.Get(ctx, key, full); err != nil {
		return "", fmt.Errorf("read the command of %s: %w", key.Name, err)
	}
	if full.UID != uid {
		return "", nil
	}
	return full.Spec.Command, nil
}

// readCommand starts reading the job's command, as the pass that placed
// it writes the placement, and returns the wait for it.
func (r *ShellJobReconciler) readCommand(ctx context.Context, job *shellv1alpha1.ShellJob) func() (string, error) {
	key, uid := client.ObjectKeyFromObject(job), job.UID
	var (
		command string
		err     error
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		command, err = r.command(ctx, key, uid)
	}()
	return func() (string, error) {
		<-done
		return command, err
	}
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

// neverStarted tells whether this process knows that the job's command was
// never started: it placed the job itself and never called Start for it.
func (r *ShellJobReconciler) neverStarted(job *shellv1alpha1.ShellJob) bool {
	return scheduledAt(job).After(r.bootTime) && r.memory.starts(client.ObjectKeyFromObject(job), job.UID) == 0
}

// scheduledAt is when the job got its worker.
func scheduledAt(job *shellv1alpha1.ShellJob) time.Time {
	if c := meta.FindStatusCondition(job.Status.Conditions, shellv1alpha1.ShellJobScheduled); c != nil {
		return c.LastTransitionTime.Time
	}
	return job.CreationTimestamp.Time
}
