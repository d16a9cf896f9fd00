package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

// bigCommand is a command of the API's largest size, 64 KiB, that starts
// with line.
func bigCommand(line string) string {
	const size = 64 << 10
	return line + "\n#" + strings.Repeat("x", size-len(line)-2)
}

// TestCacheKeepsNoCommand: the operator's cache holds jobs without their
// command and managed fields, the agent gets the whole command all the
// same, and every write the operator makes (the placement, the finalizer
// added and removed, the start, the stop's signals, the end, a stop before
// the job ran, its settling) leaves the command as it was created.
func TestCacheKeepsNoCommand(t *testing.T) {
	ns := namespace(t)
	agent := newFakeAgent()
	op := startOperator(t, ns, agent)
	readyPool(t, ns, "shell", 1)
	ctx := context.Background()

	intact := func(name, command, when string) *shellv1alpha1.ShellJob {
		t.Helper()
		j := getJob(t, ns, name)
		if j.Spec.Command != command {
			t.Errorf("%s %s: the API's command has %d bytes, want the %d it was created with", name, when, len(j.Spec.Command), len(command))
		}
		return j
	}
	cached := func(name string) *shellv1alpha1.ShellJob {
		t.Helper()
		j := &shellv1alpha1.ShellJob{}
		if err := op.mgr.GetCache().Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, j); err != nil {
			t.Fatalf("get %s from the operator's cache: %v", name, err)
		}
		return j
	}

	long := bigCommand("sleep 100")
	createJob(t, utiltesting.MakeShellJob("long", ns).Command(long))
	j := waitPhase(t, ns, "long", shellv1alpha1.PhaseRunning)
	intact("long", long, "running")
	if got := agent.command(j.UID); got != long {
		t.Errorf("the agent got a command of %d bytes, want the job's %d", len(got), len(long))
	}
	if j.Status.Summary != "sleep 100…" {
		t.Errorf("status.summary %q, want %q", j.Status.Summary, "sleep 100…")
	}
	c := cached("long")
	if c.Spec.Command != "" || c.ManagedFields != nil || c.Status.Summary != "sleep 100…" {
		t.Errorf("the cache holds a command of %d bytes, %d managed fields, summary %q: want no command, none, %q",
			len(c.Spec.Command), len(c.ManagedFields), c.Status.Summary, "sleep 100…")
	}

	stopJob(t, ns, "long", "")
	waitPhase(t, ns, "long", shellv1alpha1.PhaseStopped)
	eventually(t, waitShort, "the stopped job's finalizer removed", func() (bool, string) {
		j := getJob(t, ns, "long")
		return len(j.Finalizers) == 0, fmt.Sprint(j.Finalizers)
	})
	intact("long", long, "stopped, its finalizer removed")

	// On the worker the stopped job freed: run and ended at once.
	quick := bigCommand("echo done")
	createJob(t, utiltesting.MakeShellJob("quick", ns).Command(quick))
	waitPhase(t, ns, "quick", shellv1alpha1.PhaseSucceeded)
	intact("quick", quick, "succeeded")

	if c := cached("quick"); c.Spec.Command != "" {
		t.Errorf("the cache holds the command of a finished job, %d bytes", len(c.Spec.Command))
	}

	// One that never ran settles at its end: the cache lets it go.
	never := bigCommand("echo never")
	createJob(t, utiltesting.MakeShellJob("never", ns).Command(never).Stop(shellv1alpha1.StopReasonUser))
	waitPhase(t, ns, "never", shellv1alpha1.PhaseStopped)
	waitSettled(t, op, ns, "never")
	intact("never", never, "stopped before it ran, settled")
}
