package localcluster

import (
	"context"
	"testing"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
)

func TestQueuesWhenBusy(t *testing.T) {
	c := New(Options{Dir: t.TempDir(), Workers: 1})
	ctx := context.Background()
	a, err := c.Submit(ctx, "", shellv1alpha1.ShellJobSpec{Command: "sleep 30"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := c.Submit(ctx, "", shellv1alpha1.ShellJobSpec{Command: "echo hi"}, nil)
	ja, _ := c.Job(a.Name)
	jb, _ := c.Job(b.Name)
	if ja.Status.Phase != shellv1alpha1.PhaseRunning || jb.Status.Phase != shellv1alpha1.PhaseQueued {
		t.Fatalf("phases %s %s", ja.Status.Phase, jb.Status.Phase)
	}
	_ = c.Stop(ctx, b.Name, shellv1alpha1.StopReasonUser)
	if jb, _ := c.Job(b.Name); jb.Status.Phase != shellv1alpha1.PhaseStopped || jb.Status.Ran {
		t.Fatalf("stopped queued job: %s ran=%v", jb.Status.Phase, jb.Status.Ran)
	}
	_ = c.Stop(ctx, a.Name, shellv1alpha1.StopReasonUser)
}
