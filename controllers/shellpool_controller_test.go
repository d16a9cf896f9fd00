package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/shelljob"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

func TestPoolWorkers(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	agent := newFakeAgent()
	startOperator(t, ns, agent)

	pool := utiltesting.MakeShellPool("shell", ns).Replicas(3).Obj()
	if err := env.Client.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitShort, "status with 0/3 ready", func() (bool, string) {
		p := getPool(t, ns, "shell")
		return p.Status.Ready == "0/3" && p.Status.Replicas == 3, fmt.Sprintf("%+v", p.Status)
	})
	rev := getPool(t, ns, "shell").Status.Revision
	pods := markWorkersReady(t, ns, "shell", 3)

	for i, pod := range pods {
		if want := fmt.Sprintf("shell-%s-%d", rev, i); pod.Name != want {
			t.Errorf("pod %d is %s, want %s", i, pod.Name, want)
		}
		wantLabels := map[string]string{
			shellv1alpha1.LabelPool: "shell", shellv1alpha1.LabelRevision: rev, shellv1alpha1.LabelWorker: fmt.Sprint(i),
			shellv1alpha1.LabelPoolNamespace: ns, shellv1alpha1.LabelPoolUID: string(pool.UID),
			"app.kubernetes.io/name": "shelljob-worker", "app.kubernetes.io/managed-by": "shelljob-operator",
		}
		if diff := cmp.Diff(wantLabels, pod.Labels); diff != "" {
			t.Errorf("labels of %s (-want +got):\n%s", pod.Name, diff)
		}
		spec := pod.Spec
		if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
			t.Errorf("%s mounts a service account token", pod.Name)
		}
		if sc := spec.SecurityContext; sc == nil || sc.SeccompProfile == nil {
			t.Errorf("%s pod securityContext %+v has no seccomp profile", pod.Name, sc)
		}
		c := spec.Containers[0]
		if c.Image != DefaultWorkerImage {
			t.Errorf("image %s, want %s", c.Image, DefaultWorkerImage)
		}
		if c.SecurityContext == nil || ptr.Deref(c.SecurityContext.AllowPrivilegeEscalation, true) {
			t.Errorf("container securityContext %+v allows privilege escalation", c.SecurityContext)
		}
		// Readiness asks the agent over HTTP: no exec per probe.
		wantPorts := []corev1.ContainerPort{{Name: ReadyPortName, ContainerPort: agentapi.ReadyPort, Protocol: corev1.ProtocolTCP}}
		if diff := cmp.Diff(wantPorts, c.Ports); diff != "" {
			t.Errorf("ports (-want +got):\n%s", diff)
		}
		if !slices.Contains(c.Args, fmt.Sprintf("--ready-addr=:%d", agentapi.ReadyPort)) {
			t.Errorf("agent args %q do not serve the readiness endpoint", c.Args)
		}
		if p := c.ReadinessProbe; p == nil || p.Exec != nil || p.HTTPGet == nil || p.HTTPGet.Path != agentapi.ReadyPath ||
			p.HTTPGet.Port != intstr.FromString(ReadyPortName) || p.PeriodSeconds < 5 {
			t.Errorf("readiness probe %+v, want an httpGet of %s on port %s every 5 s or more", p, agentapi.ReadyPath, ReadyPortName)
		}
		if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != agentapi.SpoolDir || spec.Volumes[0].EmptyDir == nil {
			t.Errorf("spool: mounts %+v, volumes %+v", c.VolumeMounts, spec.Volumes)
		} else if l := spec.Volumes[0].EmptyDir.SizeLimit; l == nil || l.Cmp(resource.MustParse("1Gi")) != 0 {
			t.Errorf("spool sizeLimit %v, want the default 1Gi", l)
		}
	}
	eventually(t, waitShort, "pool available", func() (bool, string) {
		p := getPool(t, ns, "shell")
		return p.Status.Ready == "3/3" && meta.IsStatusConditionTrue(p.Status.Conditions, shellv1alpha1.ShellPoolAvailable),
			fmt.Sprintf("%+v", p.Status)
	})
	eventually(t, waitShort, "one events stream per ready worker", func() (bool, string) {
		n := 0
		for _, p := range pods {
			n += agent.streamCount(client.ObjectKeyFromObject(&p))
		}
		return n == 3, fmt.Sprintf("%d streams", n)
	})
	waitEvents(t, ns, "shell", "WorkersCreated")

	// A worker that dies is replaced, under the same name.
	dead := pods[1]
	dead.Status.Phase = corev1.PodFailed
	if err := env.Client.Status().Update(ctx, &dead); err != nil {
		t.Fatal(err)
	}
	waitWorkerReplaced(t, "the failed worker", &dead)
	waitEvents(t, ns, "shell", "WorkerFailed")
}

// TestPoolReplacesWorkerWithNoSandbox: a worker that its kubelet cannot
// give a sandbox (kubernetes/kubernetes#139916 fails one for good) is
// replaced once it has waited SandboxTimeout since it was scheduled; one
// that has waited less is left to its kubelet.
func TestPoolReplacesWorkerWithNoSandbox(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	startOperator(t, ns, newFakeAgent())
	if err := env.Client.Create(ctx, utiltesting.MakeShellPool("shell", ns).Replicas(2).Obj()); err != nil {
		t.Fatal(err)
	}
	pods := markWorkersReady(t, ns, "shell", 2)
	noSandbox := func(pod *corev1.Pod, scheduled time.Time) {
		pod.Status.Phase = corev1.PodPending
		pod.Status.Conditions = []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(scheduled)},
			{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(scheduled)},
		}
		if err := env.Client.Status().Update(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	stuck, waiting := pods[0], pods[1]
	noSandbox(&stuck, time.Now().Add(-shelljob.SandboxTimeout-time.Second))
	noSandbox(&waiting, time.Now())

	waitWorkerReplaced(t, "the stuck worker", &stuck)
	waitEvents(t, ns, "shell", "WorkerStuck")
	var p corev1.Pod
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(&waiting), &p); err != nil || p.UID != waiting.UID {
		t.Errorf("the worker that waited less was replaced: %v, uid %s, was %s", err, p.UID, waiting.UID)
	}
}

// waitWorkerReplaced waits for a new pod under the name of pod.
func waitWorkerReplaced(t *testing.T, what string, pod *corev1.Pod) {
	t.Helper()
	eventually(t, waitShort, what+" replaced", func() (bool, string) {
		var p corev1.Pod
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(pod), &p); err != nil {
			return false, err.Error()
		}
		return p.UID != pod.UID, fmt.Sprintf("uid %s phase %s", p.UID, p.Status.Phase)
	})
}

func TestPoolServiceAccountAndTemplate(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	startOperatorWith(t, ns, Options{Agent: newFakeAgent(), StopGrace: testStopGrace, AllowedServiceAccounts: []string{"shell-user"}})
	pool := utiltesting.MakeShellPool("plugin", ns).Replicas(1).Image("example/worker:1").ServiceAccount("shell-user").Obj()
	pool.Spec.Template.Labels = map[string]string{"team": "ops", shellv1alpha1.LabelPool: "spoofed"}
	if err := env.Client.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	pods := markWorkersReady(t, ns, "plugin", 1)
	spec := pods[0].Spec
	if spec.ServiceAccountName != "shell-user" || spec.AutomountServiceAccountToken != nil {
		t.Errorf("service account %q, automount %v: want the pool's account and its token",
			spec.ServiceAccountName, spec.AutomountServiceAccountToken)
	}
	if got := pods[0].Labels; got["team"] != "ops" || got[shellv1alpha1.LabelPool] != "plugin" {
		t.Errorf("labels %v: want the template's, with the operator's winning", got)
	}
	if spec.Containers[0].Image != "example/worker:1" {
		t.Errorf("image %s", spec.Containers[0].Image)
	}
}

// TestPoolServiceAccountNotAllowed: a pool that names a ServiceAccount
// outside the operator's allow-list, or the operator's own, gets no
// workers, a condition and a Warning Event that say why, and its jobs
// wait; an allowed ServiceAccount brings the workers, and an operator
// restarted with a shorter list retires them.
func TestPoolServiceAccountNotAllowed(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	agent := newFakeAgent()
	self := types.NamespacedName{Namespace: ns, Name: "shelljob-operator"}
	opts := Options{Agent: agent, StopGrace: testStopGrace,
		AllowedServiceAccounts: []string{"shell-user", self.Name}, OperatorServiceAccount: self}
	op := startOperatorWith(t, ns, opts)

	refused := func(name, wantMsg string) {
		t.Helper()
		var c *metav1.Condition
		eventually(t, waitShort, "pool "+name+" refused", func() (bool, string) {
			c = meta.FindStatusCondition(getPool(t, ns, name).Status.Conditions, shellv1alpha1.ShellPoolAvailable)
			return c != nil && c.Reason == shellv1alpha1.ShellPoolAvailableReasonServiceAccountNotAllowed, fmt.Sprintf("%+v", c)
		})
		if c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, wantMsg) {
			t.Errorf("pool %s: Available %s, message %q; want False and a message containing %q", name, c.Status, c.Message, wantMsg)
		}
		waitEvents(t, ns, name, shellv1alpha1.ShellPoolAvailableReasonServiceAccountNotAllowed)
		var pods corev1.PodList
		if err := env.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{shellv1alpha1.LabelPool: name}); err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) != 0 {
			t.Errorf("pool %s has %d worker(s), want none", name, len(pods.Items))
		}
	}

	robot := utiltesting.MakeShellPool("robot", ns).Replicas(1).ServiceAccount("robot").Obj()
	if err := env.Client.Create(ctx, robot); err != nil {
		t.Fatal(err)
	}
	refused("robot", `ServiceAccount "robot" is not in the operator's --allowed-service-accounts (shell-user, shelljob-operator)`)
	createJob(t, utiltesting.MakeShellJob("waits", ns).Pool("robot").Command("echo hi"))
	eventually(t, waitShort, "job waits for the pool's ServiceAccount", func() (bool, string) {
		c := meta.FindStatusCondition(getJob(t, ns, "waits").Status.Conditions, shellv1alpha1.ShellJobScheduled)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == shellv1alpha1.ShellJobScheduledReasonServiceAccountNotAllowed &&
			strings.Contains(c.Message, `"robot"`), fmt.Sprintf("%+v", c)
	})

	selfPool := utiltesting.MakeShellPool("self", ns).Replicas(1).ServiceAccount(self.Name).Obj()
	if err := env.Client.Create(ctx, selfPool); err != nil {
		t.Fatal(err)
	}
	refused("self", fmt.Sprintf(`ServiceAccount "shelljob-operator" is the operator's own (%s)`, self))

	// An allowed ServiceAccount: the workers come, and the job runs.
	robot = getPool(t, ns, "robot")
	robot.Spec.ServiceAccountName = "shell-user"
	if err := env.Client.Update(ctx, robot); err != nil {
		t.Fatal(err)
	}
	markWorkersReady(t, ns, "robot", 1)
	waitPhase(t, ns, "waits", shellv1alpha1.PhaseSucceeded)

	// The list is the operator's: one restarted without shell-user
	// retires the pool's idle worker and makes no other.
	deliver(t, ns, "waits")
	op.stop()
	opts.AllowedServiceAccounts = nil
	startOperatorWith(t, ns, opts)
	eventually(t, waitShort, "the worker retired", func() (bool, string) {
		var pods corev1.PodList
		if err := env.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{shellv1alpha1.LabelPool: "robot"}); err != nil {
			return false, err.Error()
		}
		return len(pods.Items) == 0, fmt.Sprintf("%d pods", len(pods.Items))
	})
	refused("robot", `ServiceAccount "shell-user" is not in the operator's --allowed-service-accounts (none)`)
}

// TestPoolRestart: a new revision brings new workers at once; the old
// worker that runs a job stays until the job ends, the idle ones go, and a
// job still queued goes to the new revision.
func TestPoolRestart(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	agent := newFakeAgent()
	startOperator(t, ns, agent)
	readyPool(t, ns, "shell", 2)
	oldRev := getPool(t, ns, "shell").Status.Revision

	createJob(t, utiltesting.MakeShellJob("a", ns).Command("sleep 100"))
	createJob(t, utiltesting.MakeShellJob("b", ns).Command("sleep 100"))
	a := waitPhase(t, ns, "a", shellv1alpha1.PhaseRunning)
	waitPhase(t, ns, "b", shellv1alpha1.PhaseRunning)
	createJob(t, utiltesting.MakeShellJob("queued", ns).Command("echo later"))
	eventually(t, waitShort, "queued job waiting", func() (bool, string) {
		j := getJob(t, ns, "queued")
		c := meta.FindStatusCondition(j.Status.Conditions, shellv1alpha1.ShellJobScheduled)
		return c != nil && c.Reason == shellv1alpha1.ShellJobScheduledReasonNoIdleWorker, fmt.Sprintf("%v", j.Status.Conditions)
	})
	// b ends before the restart, so its worker is idle.
	b := getJob(t, ns, "b")
	agent.exit(podKey(b), string(b.UID), 0)
	waitPhase(t, ns, "b", shellv1alpha1.PhaseSucceeded)
	// The queued job now runs on b's worker, and ends at once.
	waitPhase(t, ns, "queued", shellv1alpha1.PhaseSucceeded)

	createJob(t, utiltesting.MakeShellJob("c", ns).Command("sleep 100"))
	waitPhase(t, ns, "c", shellv1alpha1.PhaseRunning)
	// Both workers busy: a and c. Queue d, then restart.
	createJob(t, utiltesting.MakeShellJob("d", ns).Command("sleep 100"))
	eventually(t, waitShort, "d waiting", func() (bool, string) {
		j := getJob(t, ns, "d")
		return j.Status.Number != 0 && j.Status.Pod == "", j.Status.Pod
	})
	pool := getPool(t, ns, "shell")
	pool.Spec.RestartedAt = ptr.To(metav1.Now())
	if err := env.Client.Update(ctx, pool); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitShort, "a new revision", func() (bool, string) {
		p := getPool(t, ns, "shell")
		return p.Status.Revision != oldRev, p.Status.Revision
	})
	newRev := getPool(t, ns, "shell").Status.Revision
	markWorkersReady(t, ns, "shell", 2)
	d := waitPhase(t, ns, "d", shellv1alpha1.PhaseRunning)
	if d.Status.Revision != newRev {
		t.Errorf("queued job ran on revision %s, want the new %s", d.Status.Revision, newRev)
	}
	eventually(t, waitShort, "old revision listed with its 2 running jobs", func() (bool, string) {
		p := getPool(t, ns, "shell")
		want := []shellv1alpha1.OldRevision{{Revision: oldRev, Pods: 2, RunningJobs: 2}}
		return cmp.Equal(want, p.Status.OldRevisions), fmt.Sprintf("%+v", p.Status.OldRevisions)
	})

	// a ends: its old worker stays until a is delivered, then goes; c's
	// stays.
	agent.exit(podKey(a), string(a.UID), 0)
	waitPhase(t, ns, "a", shellv1alpha1.PhaseSucceeded)
	time.Sleep(200 * time.Millisecond)
	if err := env.Client.Get(ctx, podKey(a), &corev1.Pod{}); err != nil {
		t.Fatalf("a's old worker went before a was delivered: %v", err)
	}
	deliver(t, ns, "a")
	eventually(t, waitShort, "a's old worker deleted", func() (bool, string) {
		var p corev1.Pod
		err := env.Client.Get(ctx, podKey(a), &p)
		return client.IgnoreNotFound(err) == nil && err != nil, fmt.Sprint(err)
	})
	var still corev1.Pod
	c := getJob(t, ns, "c")
	if err := env.Client.Get(ctx, podKey(c), &still); err != nil {
		t.Errorf("c's old worker %s: %v", c.Status.Pod, err)
	}
	eventually(t, waitShort, "old revision down to 1 pod", func() (bool, string) {
		p := getPool(t, ns, "shell")
		want := []shellv1alpha1.OldRevision{{Revision: oldRev, Pods: 1, RunningJobs: 1}}
		return cmp.Equal(want, p.Status.OldRevisions), fmt.Sprintf("%+v", p.Status.OldRevisions)
	})
	agent.exit(podKey(c), string(c.UID), 0)
	waitPhase(t, ns, "c", shellv1alpha1.PhaseSucceeded)
	for _, name := range []string{"b", "queued", "c"} {
		deliver(t, ns, name)
	}
	eventually(t, waitShort, "no old revision left", func() (bool, string) {
		p := getPool(t, ns, "shell")
		return len(p.Status.OldRevisions) == 0, fmt.Sprintf("%+v", p.Status.OldRevisions)
	})
	waitEvents(t, ns, "shell", "NewRevision", "WorkersRetired")
}

// TestPoolsIndependent: a pool whose workers are all busy or missing
// never holds up another.
func TestPoolsIndependent(t *testing.T) {
	ns := namespace(t)
	startOperator(t, ns, newFakeAgent())
	readyPool(t, ns, "shell", 1)
	// The plugin pool never gets ready workers.
	if err := env.Client.Create(context.Background(), utiltesting.MakeShellPool("plugin", ns).Replicas(1).Obj()); err != nil {
		t.Fatal(err)
	}
	createJob(t, utiltesting.MakeShellJob("p", ns).Pool("plugin").Command("sleep 100"))
	createJob(t, utiltesting.MakeShellJob("s", ns).Command("echo hi"))
	waitPhase(t, ns, "s", shellv1alpha1.PhaseSucceeded)
	p := getJob(t, ns, "p")
	c := meta.FindStatusCondition(p.Status.Conditions, shellv1alpha1.ShellJobScheduled)
	if c == nil || c.Reason != shellv1alpha1.ShellJobScheduledReasonNoReadyWorker {
		t.Errorf("plugin job: Scheduled %+v, want NoReadyWorker", c)
	}
}

// deliver marks a job delivered, as the bot does once the final and the
// files reached the user.
func deliver(t *testing.T, ns, name string) {
	t.Helper()
	j := getJob(t, ns, name)
	patch := client.MergeFrom(j.DeepCopy())
	metav1.SetMetaDataAnnotation(&j.ObjectMeta, shellv1alpha1.AnnotationDelivered, time.Now().Format(time.RFC3339))
	if err := env.Client.Patch(context.Background(), j, patch); err != nil {
		t.Fatal(err)
	}
}

// TestRetiredWorkerDeliveryGrace: a retired worker that holds undelivered
// jobs goes once the grace has run out.
func TestRetiredWorkerDeliveryGrace(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	agent := newFakeAgent()
	op := startOperator(t, ns, agent)
	readyPool(t, ns, "shell", 1)
	createJob(t, utiltesting.MakeShellJob("done", ns).Command("echo done"))
	j := waitPhase(t, ns, "done", shellv1alpha1.PhaseSucceeded)
	op.stop()
	// A grace of a second, from a fresh operator.
	startOperatorWith(t, ns, Options{Agent: agent, StopGrace: testStopGrace, DeliveryGrace: time.Second})
	pool := getPool(t, ns, "shell")
	pool.Spec.RestartedAt = ptr.To(metav1.Now())
	if err := env.Client.Update(ctx, pool); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitShort, "the undelivered job's old worker deleted after the grace", func() (bool, string) {
		err := env.Client.Get(ctx, podKey(j), &corev1.Pod{})
		return client.IgnoreNotFound(err) == nil && err != nil, fmt.Sprint(err)
	})
}
