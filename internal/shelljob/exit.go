package shelljob

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
)

// An Exit is the end of a job's command as its worker's agent reported it.
type Exit struct {
	// Worker is the worker pod the command ran on.
	Worker string
	// Code is the command's exit code, nil when it is unknown.
	Code *int
	// At is when the command ended; zero for unknown.
	At time.Time
	// OutputBytes and DroppedBytes count the output written and not kept.
	OutputBytes, DroppedBytes int64
	// Files counts what the command left in $SHELLJOB_OUT, nil when its
	// agent does not count.
	Files *shellv1alpha1.ShellJobFiles
	// OOMKills counts the worker's out-of-memory kills while the command
	// ran.
	OOMKills int64
}

// ExitOf is the exit an agent's EventExited tells, of a command that ran on
// worker.
func ExitOf(worker string, e agentapi.Event) Exit {
	exit := Exit{Worker: worker, Code: e.ExitCode, At: e.Time, OutputBytes: e.OutputBytes, DroppedBytes: e.DroppedBytes,
		OOMKills: e.OOMKills}
	if e.Files != nil {
		exit.Files = &shellv1alpha1.ShellJobFiles{Count: e.Files.Count, Bytes: e.Files.Bytes}
	}
	return exit
}

// An Event is what the operator tells of a step of a job, as a Kubernetes
// Event: its type (corev1.EventTypeNormal or Warning), its reason and its
// note.
type Event struct {
	Type, Reason, Note string
}

// RecordExit writes e into the job's status (its completion time, output
// counts, files and exit code), and says the exit in words ("exit 3",
// "exit status unknown").
func RecordExit(j *shellv1alpha1.ShellJob, e Exit, now time.Time) string {
	at := e.At
	if at.IsZero() {
		at = now
	}
	j.Status.CompletionTime = ptr.To(metav1.NewTime(at))
	j.Status.OutputBytes, j.Status.DroppedBytes = e.OutputBytes, e.DroppedBytes
	j.Status.Files = nil
	if e.Files != nil {
		j.Status.Files = &shellv1alpha1.ShellJobFiles{Count: e.Files.Count, Bytes: e.Files.Bytes}
	}
	j.Status.ExitCode = nil
	if e.Code == nil {
		return "exit status unknown"
	}
	j.Status.ExitCode = ptr.To(int32(*e.Code))
	return fmt.Sprintf("exit %d", *e.Code)
}

// SetExited ends a job whose command exited (e) and returns the Event that
// tells it. The job's status.stopSteps are the signals sent to it. It ends
// Stopped after the last signal when any was sent; Succeeded on exit 0;
// Failed with OutOfMemory when the kernel killed some of its processes at
// the worker's memory limit (memoryLimit, for the message); Failed
// otherwise. A stop asked for after the command ended sent nothing, and is
// no part of the end.
func SetExited(j *shellv1alpha1.ShellJob, e Exit, memoryLimit string, now time.Time) Event {
	exit := RecordExit(j, e, now)
	var ev Event
	switch steps := j.Status.StopSteps; {
	case len(steps) > 0:
		j.Status.Phase = shellv1alpha1.PhaseStopped
		msg := fmt.Sprintf("stopped%s (%s) after %s: %s", ByStopper(j), j.Status.StopReason, steps[len(steps)-1].Signal, exit)
		SetFinishedCondition(j, now, shellv1alpha1.ShellJobFinishedReasonStopped, msg)
		return Event{corev1.EventTypeNormal, "Stopped", msg}
	case e.Code != nil && *e.Code == 0:
		j.Status.Phase = shellv1alpha1.PhaseSucceeded
		SetFinishedCondition(j, now, shellv1alpha1.ShellJobFinishedReasonExited, exit)
		ev = Event{corev1.EventTypeNormal, "Succeeded", exit}
	case e.OOMKills > 0:
		j.Status.Phase = shellv1alpha1.PhaseFailed
		msg := fmt.Sprintf("the command ran out of memory: the out-of-memory killer killed %d of its processes at worker %s's limit of %s; %s",
			e.OOMKills, e.Worker, memoryLimit, exit)
		SetFinishedCondition(j, now, shellv1alpha1.ShellJobFinishedReasonOutOfMemory, msg)
		ev = Event{corev1.EventTypeWarning, shellv1alpha1.ShellJobFinishedReasonOutOfMemory, msg}
	default:
		j.Status.Phase = shellv1alpha1.PhaseFailed
		SetFinishedCondition(j, now, shellv1alpha1.ShellJobFinishedReasonExited, exit)
		ev = Event{corev1.EventTypeWarning, "Failed", exit}
	}
	j.Status.StopReason = ""
	return ev
}
