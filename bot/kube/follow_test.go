package kube_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/bot/kube"
	"shelljob.dev/shelljob/internal/agentapi"
)

// echoAgent is an agent whose follow writes the pod's name.
type echoAgent struct {
	agentapi.Client
	follows int
}

func (a *echoAgent) Follow(_ context.Context, pod types.NamespacedName, _ string, offset int64, w io.Writer) (int64, error) {
	a.follows++
	n, err := io.WriteString(w, pod.Name)
	return offset + int64(n), err
}

// A worker pod that took the name of the one a job ran on (created after
// the job started) is not followed.
func TestFollowRefusesAReplacedWorker(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	c := newCluster(t, ns)
	agent := &echoAgent{}
	c.Agent = agent
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.WorkerNamespace, Name: "shell-0"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "worker"}}},
	}
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	job := func(started time.Time) *shellv1alpha1.ShellJob {
		return &shellv1alpha1.ShellJob{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "j", UID: "uid-j"},
			Status:     shellv1alpha1.ShellJobStatus{Pod: "shell-0", Ran: true, StartTime: &metav1.Time{Time: started}},
		}
	}

	var out stringWriter
	if _, err := c.Follow(ctx, job(pod.CreationTimestamp.Add(time.Minute)), 0, &out); err != nil || out.s != "shell-0" {
		t.Errorf("following the job's own pod: %q, %v", out.s, err)
	}
	_, err := c.Follow(ctx, job(pod.CreationTimestamp.Add(-time.Minute)), 0, io.Discard)
	if !errors.Is(err, kube.ErrWorkerReplaced) {
		t.Errorf("following a replacement: %v, want ErrWorkerReplaced", err)
	}
	if agent.follows != 1 {
		t.Errorf("the agent was followed %d times, want 1", agent.follows)
	}
}

type stringWriter struct{ s string }

func (w *stringWriter) Write(p []byte) (int, error) { w.s += string(p); return len(p), nil }
