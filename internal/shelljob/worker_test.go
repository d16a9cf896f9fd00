package shelljob

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
)

// TestWorkerEnd: how a job's end is told from its worker pod.
func TestWorkerEnd(t *testing.T) {
	limited := func(p *corev1.Pod) {
		p.Spec.Containers = []corev1.Container{{Name: agentapi.WorkerContainer, Resources: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}}}
	}
	cases := []struct {
		name   string
		pod    func(*corev1.Pod)
		reason string
		why    string
	}{
		{"running", func(*corev1.Pod) {}, "", ""},
		{"evicted by the kubelet", func(p *corev1.Pod) {
			p.Status.Phase, p.Status.Reason = corev1.PodFailed, "Evicted"
			p.Status.Message = `Usage of EmptyDir volume "spool" exceeds the limit "1Gi". `
		}, shellv1alpha1.ShellJobFinishedReasonWorkerEvicted, `was evicted (Usage of EmptyDir volume "spool" exceeds the limit "1Gi")`},
		{"disruption target before the eviction shows", func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
				Reason: "TerminationByKubelet", Message: "The node was low on resource: ephemeral-storage."}}
		}, shellv1alpha1.ShellJobFinishedReasonWorkerEvicted, "was evicted (The node was low on resource: ephemeral-storage)"},
		{"container killed out of memory", func(p *corev1.Pod) {
			limited(p)
			p.Status.Phase = corev1.PodFailed
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: agentapi.WorkerContainer,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}}
		}, shellv1alpha1.ShellJobFinishedReasonOutOfMemory, "was killed out of memory, at its limit of 1Gi"},
		{"deleted", func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: time.Now()} },
			shellv1alpha1.ShellJobFinishedReasonWorkerLost, "was deleted"},
		{"container ended", func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodFailed
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: agentapi.WorkerContainer,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error"}}}}
		}, shellv1alpha1.ShellJobFinishedReasonWorkerLost, "ended (phase Failed, container " + agentapi.WorkerContainer + " exited 2 (Error))"},
	}
	for _, c := range cases {
		p := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		c.pod(p)
		reason, why, ended := WorkerEnd(p)
		if reason != c.reason || why != c.why || ended != (c.reason != "") {
			t.Errorf("%s: %q %q %v, want %q %q", c.name, reason, why, ended, c.reason, c.why)
		}
	}
	if reason, why, _ := WorkerEnd(nil); reason != shellv1alpha1.ShellJobFinishedReasonWorkerLost || why != "was deleted" {
		t.Errorf("no pod: %q %q", reason, why)
	}
}

// TestShutdownEnd: a job whose agent stopped it on the worker's way out
// ends for the pod's reason once the pod says it, and as a lost worker
// once it has not said for ShutdownSettle.
func TestShutdownEnd(t *testing.T) {
	exited := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const (
		evicted = shellv1alpha1.ShellJobFinishedReasonWorkerEvicted
		lost    = shellv1alpha1.ShellJobFinishedReasonWorkerLost
		oom     = shellv1alpha1.ShellJobFinishedReasonOutOfMemory
	)
	cases := map[string]struct {
		reason, why string
		ended       bool
		after       time.Duration
		wantReason  string
		wantWhy     string
		wantWait    time.Duration
	}{
		"the pod says it was evicted": {reason: evicted, why: "was evicted (x)", ended: true, after: time.Second,
			wantReason: evicted, wantWhy: "was evicted (x)"},
		"the pod does not say yet": {after: 2 * time.Second, wantWait: time.Second},
		"the last wait is shorter": {after: ShutdownSettle - 300*time.Millisecond, wantWait: 300 * time.Millisecond},
		"the pod never said":       {after: ShutdownSettle, wantReason: lost, wantWhy: "shut down"},
		"an out-of-memory mark is no kill of an orderly stop": {reason: oom, why: "was killed out of memory, at its limit of 1Gi",
			ended: true, after: time.Second, wantWait: time.Second},
		"nor later": {reason: oom, why: "was killed out of memory", ended: true, after: time.Minute, wantReason: lost, wantWhy: "shut down"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			reason, why, wait := ShutdownEnd(tc.reason, tc.why, tc.ended, exited, exited.Add(tc.after))
			if reason != tc.wantReason || why != tc.wantWhy || wait != tc.wantWait {
				t.Errorf("ShutdownEnd = %q, %q, %v; want %q, %q, %v", reason, why, wait, tc.wantReason, tc.wantWhy, tc.wantWait)
			}
		})
	}
}

// TestSandboxStuck: a worker pod is replaced once it has been scheduled
// for SandboxTimeout with no sandbox, and only then.
func TestSandboxStuck(t *testing.T) {
	scheduledAt := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	scheduled := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(scheduledAt)}
	noSandbox := corev1.PodCondition{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionFalse}
	sandbox := corev1.PodCondition{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue}
	pending := func(conds ...corev1.PodCondition) corev1.PodStatus {
		return corev1.PodStatus{Phase: corev1.PodPending, Conditions: conds}
	}
	pulling := pending(scheduled, noSandbox)
	pulling.ContainerStatuses = []corev1.ContainerStatus{{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	cases := map[string]struct {
		status   corev1.PodStatus
		deleting bool
		after    time.Duration
		stuck    bool
		wait     time.Duration
	}{
		"no sandbox yet":                        {status: pending(scheduled, noSandbox), after: time.Minute, wait: SandboxTimeout - time.Minute},
		"no sandbox for the timeout":            {status: pending(scheduled, noSandbox), after: SandboxTimeout, stuck: true},
		"a kubelet that does not say":           {status: pending(scheduled), after: time.Hour},
		"a sandbox, the image still pulling":    {status: pending(scheduled, sandbox), after: time.Hour},
		"a container that started":              {status: pulling, after: time.Hour},
		"not scheduled":                         {status: pending(noSandbox), after: time.Hour},
		"running":                               {status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{scheduled}}, after: time.Hour},
		"being deleted":                         {status: pending(scheduled, noSandbox), deleting: true, after: time.Hour},
		"no status (a cluster with no kubelet)": {after: time.Hour},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod := &corev1.Pod{Status: tc.status}
			if tc.deleting {
				pod.DeletionTimestamp = &metav1.Time{Time: scheduledAt}
			}
			stuck, wait := SandboxStuck(pod, scheduledAt.Add(tc.after), SandboxTimeout)
			if stuck != tc.stuck || wait != tc.wait {
				t.Errorf("SandboxStuck = %v, %v; want %v, %v", stuck, wait, tc.stuck, tc.wait)
			}
		})
	}
}
