package shelljob

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
)

// ShutdownSettle is how long after a worker's agent stopped a command on
// its way out the operator waits for the worker pod's status to say why
// the pod ended: the kubelet stops the containers before it reports an
// eviction.
const ShutdownSettle = 15 * time.Second

// WorkerEnd tells whether a worker pod is gone (nil) or going, and how: the
// Finished reason of a job that ran there, and what happened to the pod,
// as a clause ("was evicted (…)").
func WorkerEnd(pod *corev1.Pod) (reason, why string, ended bool) {
	if pod == nil {
		return shellv1alpha1.ShellJobFinishedReasonWorkerLost, "was deleted", true
	}
	if msg := evicted(pod); msg != "" {
		return WasEvicted(msg)
	}
	switch {
	case oomKilled(pod):
		return shellv1alpha1.ShellJobFinishedReasonOutOfMemory, "was killed out of memory, at its limit of " + MemoryLimit(pod), true
	case pod.DeletionTimestamp != nil:
		return shellv1alpha1.ShellJobFinishedReasonWorkerLost, "was deleted", true
	case pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded:
		return shellv1alpha1.ShellJobFinishedReasonWorkerLost, "ended (" + PodEndReason(pod) + ")", true
	}
	return "", "", false
}

// WasEvicted is WorkerEnd's answer for a pod evicted with message msg: the
// pod's own, or the kubelet's Evicted Event's when the pod does not say.
func WasEvicted(msg string) (reason, why string, ended bool) {
	return shellv1alpha1.ShellJobFinishedReasonWorkerEvicted, "was evicted (" + clause(msg) + ")", true
}

// ShutdownEnd is how a job ends whose worker's agent stopped its command on
// the way out, at exitedAt: for the worker's end (WorkerEnd's reason and
// why, ended), once the pod says it. An orderly stop is no out-of-memory
// kill: under cgroup v1 an earlier kill of one process marks the container
// OOMKilled all the same. Until the pod says, or ShutdownSettle has passed,
// wait says how soon to look again (at most a second); after that the
// worker was lost, "shut down".
func ShutdownEnd(reason, why string, ended bool, exitedAt, now time.Time) (string, string, time.Duration) {
	if ended && reason != shellv1alpha1.ShellJobFinishedReasonOutOfMemory {
		return reason, why, 0
	}
	if wait := exitedAt.Add(ShutdownSettle).Sub(now); wait > 0 {
		return "", "", min(wait, time.Second)
	}
	return shellv1alpha1.ShellJobFinishedReasonWorkerLost, "shut down", 0
}

// PodEndReason says why a pod ended, for Events and job messages: its
// phase, its reason, and each terminated container's exit.
func PodEndReason(pod *corev1.Pod) string {
	msg := "phase " + string(pod.Status.Phase)
	if pod.Status.Reason != "" {
		msg += ", " + pod.Status.Reason
	}
	for _, c := range pod.Status.ContainerStatuses {
		if t := c.State.Terminated; t != nil {
			msg += fmt.Sprintf(", container %s exited %d", c.Name, t.ExitCode)
			if t.Reason != "" {
				msg += " (" + t.Reason + ")"
			}
		}
	}
	return msg
}

// MemoryLimit is the worker container's memory limit, "none" if unset.
func MemoryLimit(pod *corev1.Pod) string {
	for _, c := range pod.Spec.Containers {
		if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok && c.Name == agentapi.WorkerContainer {
			return q.String()
		}
	}
	return "none"
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

// SandboxTimeout is how long a worker pod may stay scheduled without a
// sandbox before it is replaced. A kubelet can fail a pod's sandbox for good:
// one that draws the last user-namespace range, which holds ID 2^32-1, gets
// "failed to create network namespace … invalid argument" on every try
// (kubernetes/kubernetes#139916) until the pod is deleted, and a new pod
// draws a new range. Image pulls come after the sandbox, so a slow pull is
// no sandbox wait.
const SandboxTimeout = 3 * time.Minute

// SandboxStuck tells whether a pending pod has had no sandbox for timeout
// since it was scheduled, as its kubelet's PodReadyToStartContainers
// condition says; if not yet, wait is how long until it would have (0: it
// is not waiting for one, or its kubelet does not say).
func SandboxStuck(pod *corev1.Pod, now time.Time, timeout time.Duration) (stuck bool, wait time.Duration) {
	if pod.Status.Phase != corev1.PodPending || pod.DeletionTimestamp != nil {
		return false, 0
	}
	var scheduled time.Time
	noSandbox := false
	for _, c := range pod.Status.Conditions {
		switch c.Type {
		case corev1.PodReadyToStartContainers:
			noSandbox = c.Status == corev1.ConditionFalse
		case corev1.PodScheduled:
			if c.Status == corev1.ConditionTrue {
				scheduled = c.LastTransitionTime.Time
			}
		}
	}
	if !noSandbox || scheduled.IsZero() {
		return false, 0
	}
	for _, c := range pod.Status.ContainerStatuses {
		if c.State.Running != nil || c.State.Terminated != nil {
			return false, 0
		}
	}
	if wait := scheduled.Add(timeout).Sub(now); wait > 0 {
		return false, wait
	}
	return true, 0
}
