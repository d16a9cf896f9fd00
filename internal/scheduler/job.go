package scheduler

import (
	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/shelljob"
)

// JobOf is what placement sees of a ShellJob: the worker it holds is its
// status.pod (the caller may know a placement the status does not show
// yet); its user, whose jobs a pool may cap, is its origin's user as
// written (a Telegram id for an older bot's job: one person still).
func JobOf(j *shellv1alpha1.ShellJob) Job {
	return Job{
		Name:      j.Name,
		Mode:      shelljob.Mode(j),
		Created:   j.CreationTimestamp.Time,
		Pod:       j.Status.Pod,
		Stopping:  shelljob.IsStopRequested(j),
		Preferred: j.Annotations[shellv1alpha1.AnnotationPreferredWorker],
		User:      j.Spec.Origin.User,
		Approved:  j.Spec.Approval != nil && j.Spec.Approval.Decision == shellv1alpha1.ApprovalApproved,
	}
}

// Waits tells whether a ShellJob waits for a worker: it holds none, has not
// ended and is not to stop (a job stopped while it waits never runs).
func Waits(j *shellv1alpha1.ShellJob) bool {
	return !shelljob.IsAssigned(j) && !shelljob.IsFinished(j) && !shelljob.IsStopRequested(j)
}
