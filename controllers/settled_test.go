package controllers

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/shelljob"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

// TestSettle: a finished job that nothing waits for settles: labelled with
// its expiry and its number, and out of the operator's cache, but still
// there to read. One that never ran settles at its end; one that ran, once
// it is marked delivered.
func TestSettle(t *testing.T) {
	ns := namespace(t)
	op := startOperator(t, ns, newFakeAgent())
	readyPool(t, ns, "shell", 1)
	createJob(t, utiltesting.MakeShellJob("never", ns).Command("echo no").Stop(shellv1alpha1.StopReasonUser))
	createJob(t, utiltesting.MakeShellJob("ran", ns).Command("echo yes"))
	waitSettled(t, op, ns, "never")

	ran := waitPhase(t, ns, "ran", shellv1alpha1.PhaseSucceeded)
	time.Sleep(time.Second)
	if _, ok := getJob(t, ns, "ran").Labels[shellv1alpha1.LabelExpires]; ok {
		t.Fatal("a job settled before it was delivered")
	}
	if err := op.mgr.GetCache().Get(context.Background(), client.ObjectKeyFromObject(ran), &shellv1alpha1.ShellJob{}); err != nil {
		t.Fatalf("an undelivered job is not in the cache: %v", err)
	}
	deliver(t, ns, "ran")
	waitSettled(t, op, ns, "ran")
}

// waitSettled waits until the job is settled, and checks its labels and
// that the operator's cache no longer has it.
func waitSettled(t *testing.T, op *operator, ns, name string) {
	t.Helper()
	var j *shellv1alpha1.ShellJob
	eventually(t, waitShort, "job "+name+" settled", func() (bool, string) {
		j = getJob(t, ns, name)
		_, ok := j.Labels[shellv1alpha1.LabelExpires]
		return ok, fmt.Sprint(j.Labels)
	})
	expiry, ok := shelljob.SettledExpiry(j)
	want, _ := shelljob.Expiry(j, DefaultJobTTL, DefaultDeliveryGrace)
	if !ok || !expiry.Equal(want.Truncate(time.Second)) {
		t.Errorf("%s: expires %v, %v; want %v", name, expiry, ok, want)
	}
	if n := j.Labels[shellv1alpha1.LabelNumber]; n != strconv.FormatInt(j.Status.Number, 10) || n == "0" {
		t.Errorf("%s: number label %q, status.number %d", name, n, j.Status.Number)
	}
	eventually(t, waitShort, "job "+name+" out of the cache", func() (bool, string) {
		err := op.mgr.GetCache().Get(context.Background(), client.ObjectKeyFromObject(j), &shellv1alpha1.ShellJob{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

// TestSettledSweep: the sweep deletes the settled jobs that expired, and
// leaves those that have not, or never do. It sweeps as the operator
// starts.
func TestSettledSweep(t *testing.T) {
	ns := namespace(t)
	for name, expires := range map[string]string{
		"expired": strconv.FormatInt(time.Now().Add(-time.Second).Unix(), 10),
		"later":   strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10),
		"kept":    shelljob.Never,
	} {
		createJob(t, utiltesting.MakeShellJob(name, ns).Pool("none").
			Labels(map[string]string{shellv1alpha1.LabelExpires: expires, shellv1alpha1.LabelNumber: "3"}))
	}
	startOperator(t, ns, newFakeAgent())
	waitGone(t, ns, "expired")
	for _, name := range []string{"later", "kept"} {
		if j := getJob(t, ns, name); j.Status.Number != 0 {
			t.Errorf("%s: the operator numbered a settled job (#%d): it is out of its sight", name, j.Status.Number)
		}
	}
}
