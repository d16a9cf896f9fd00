package controllers

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

// TestWorkerNamespace: pools and jobs in one namespace, their workers in
// another. Workers are made, exec'd, followed and deleted there, and map
// back to their pool and jobs by their labels.
func TestWorkerNamespace(t *testing.T) {
	ctx := context.Background()
	ns, wns := namespace(t), env.Namespace(t, "w")
	agent := newFakeAgent()
	startOperatorWith(t, ns, Options{Agent: agent, WorkerNamespace: wns, StopGrace: testStopGrace})

	pool := utiltesting.MakeShellPool("shell", ns).Replicas(2).Obj()
	if err := env.Client.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	pods := markWorkersReadyIn(t, ns, wns, "shell", 2)
	var here corev1.PodList
	if err := env.Client.List(ctx, &here, client.InNamespace(ns)); err != nil || len(here.Items) != 0 {
		t.Errorf("pods in the jobs' namespace: %d, %v", len(here.Items), err)
	}
	for _, p := range pods {
		if len(p.OwnerReferences) != 0 || p.Labels[shellv1alpha1.LabelPoolNamespace] != ns {
			t.Errorf("%s: owners %v, labels %v", p.Name, p.OwnerReferences, p.Labels)
		}
	}
	eventually(t, waitShort, "pool ready, and the streams in the workers' namespace", func() (bool, string) {
		p := getPool(t, ns, "shell")
		n := 0
		for _, pod := range pods {
			n += agent.streamCount(types.NamespacedName{Namespace: wns, Name: pod.Name})
		}
		return p.Status.Ready == "2/2" && n == 2, fmt.Sprintf("ready %s, %d streams", p.Status.Ready, n)
	})
	if p := getPool(t, ns, "shell"); !slices.Contains(p.Finalizers, PoolFinalizer) {
		t.Errorf("pool finalizers %v, want %s", p.Finalizers, PoolFinalizer)
	}

	// A job runs on a worker there, and a stop reaches it there.
	createJob(t, utiltesting.MakeShellJob("echo", ns).Command("echo hi"))
	if j := waitPhase(t, ns, "echo", shellv1alpha1.PhaseSucceeded); j.Status.Pod == "" {
		t.Errorf("no pod recorded: %+v", j.Status)
	}
	createJob(t, utiltesting.MakeShellJob("sleep", ns).Command("sleep 100"))
	waitPhase(t, ns, "sleep", shellv1alpha1.PhaseRunning)
	stopJob(t, ns, "sleep", "")
	j := waitPhase(t, ns, "sleep", shellv1alpha1.PhaseStopped)
	if ptr.Deref(j.Status.ExitCode, -1) != 130 {
		t.Errorf("exit %v, want 130", j.Status.ExitCode)
	}
	if got := agent.podNamespaces(); !cmp.Equal(got, []string{wns}) {
		t.Errorf("the agent was reached in namespaces %v, want only %s", got, wns)
	}

	// A worker lost there fails its job.
	createJob(t, utiltesting.MakeShellJob("lost", ns).Command("sleep 100"))
	j = waitPhase(t, ns, "lost", shellv1alpha1.PhaseRunning)
	if err := env.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: wns, Name: j.Status.Pod}}); err != nil {
		t.Fatal(err)
	}
	if j = waitPhase(t, ns, "lost", shellv1alpha1.PhaseFailed); finished(j).Reason != shellv1alpha1.ShellJobFinishedReasonWorkerLost {
		t.Errorf("Finished %+v, want WorkerLost", finished(j))
	}
	markWorkersReadyIn(t, ns, wns, "shell", 2)

	// A deleted pool takes its workers with it.
	if err := env.Client.Delete(ctx, getPool(t, ns, "shell")); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitShort, "the pool and its workers gone", func() (bool, string) {
		var list corev1.PodList
		if err := env.Client.List(ctx, &list, client.InNamespace(wns)); err != nil {
			return false, err.Error()
		}
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(pool), &shellv1alpha1.ShellPool{})
		return len(list.Items) == 0 && apierrors.IsNotFound(err), fmt.Sprintf("%d pods, pool: %v", len(list.Items), err)
	})
}

// TestWorkerPodSecurity: the API server's Pod Security admission lets the
// operator's worker pods into a namespace that enforces baseline, as the
// chart's does, even when the pool asks for a non-root user, and keeps
// them out of one that enforces restricted (root, added capabilities);
// with jobs in namespaces of their own (a user namespace, an unmasked
// /proc, a Localhost seccomp profile) or without.
func TestWorkerPodSecurity(t *testing.T) {
	for name, sec := range map[string]WorkerSecurity{
		"pod namespaces": {},
		"job namespaces": {UserNamespaces: true, SeccompProfile: "shelljob/worker.json"},
	} {
		t.Run(name, func(t *testing.T) { workerPodSecurity(t, sec) })
	}
}

func workerPodSecurity(t *testing.T, sec WorkerSecurity) {
	ctx := context.Background()
	pool := utiltesting.MakeShellPool("shell", "pools").Obj()
	pool.Spec.Template.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](2000)}
	for level, allowed := range map[string]bool{"baseline": true, "restricted": false} {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: level + "-", Labels: map[string]string{
			"pod-security.kubernetes.io/enforce": level, "pod-security.kubernetes.io/enforce-version": "latest",
		}}}
		if err := env.Client.Create(ctx, ns); err != nil {
			t.Fatal(err)
		}
		pod := workerPod(pool, ns.Name, Revision(pool, DefaultWorkerImage, sec), 0, DefaultWorkerImage, sec)
		err := env.Client.Create(ctx, pod, client.DryRunAll)
		switch {
		case allowed && err != nil:
			t.Errorf("a worker pod in a namespace that enforces %s: %v", level, err)
		case !allowed && !apierrors.IsForbidden(err):
			t.Errorf("a worker pod in a namespace that enforces %s: %v, want forbidden", level, err)
		}
	}
}
