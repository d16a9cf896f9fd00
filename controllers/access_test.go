package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/texts"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

// runningOf lists the jobs of names that run, in order.
func runningOf(t *testing.T, ns string, names ...string) []string {
	t.Helper()
	var out []string
	for _, n := range names {
		if getJob(t, ns, n).Status.Phase == shellv1alpha1.PhaseRunning {
			out = append(out, n)
		}
	}
	return out
}

// waitRunning waits until exactly want of names run.
func waitRunning(t *testing.T, ns string, names []string, want ...string) {
	t.Helper()
	eventually(t, waitShort, fmt.Sprintf("%v running", want), func() (bool, string) {
		got := runningOf(t, ns, names...)
		return slices.Equal(got, want), fmt.Sprint(got)
	})
}

// TestMaxRunningPerUser: with maxRunningPerUser 2 on a 4-worker pool,
// alice's five jobs run two at a time, oldest first, while bob's run
// beside them; a waiting job says why, and a Direct job of alice waits
// too.
func TestMaxRunningPerUser(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	agent := newFakeAgent()
	startOperator(t, ns, agent)
	pool := utiltesting.MakeShellPool("dev", ns).Replicas(4).MaxRunningPerUser(2).Obj()
	if err := env.Client.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	markWorkersReady(t, ns, "dev", 4)

	alice := []string{"a1", "a2", "a3", "a4", "a5"}
	for _, n := range alice {
		createJob(t, utiltesting.MakeShellJob(n, ns).Pool("dev").User("alice").Command("sleep 100"))
	}
	bob := []string{"b1", "b2"}
	for _, n := range bob {
		createJob(t, utiltesting.MakeShellJob(n, ns).Pool("dev").User("bob").Command("sleep 100"))
	}
	waitRunning(t, ns, alice, "a1", "a2")
	waitRunning(t, ns, bob, "b1", "b2")
	for _, n := range alice[2:] {
		eventually(t, waitShort, n+" waiting for alice's jobs", func() (bool, string) {
			j := getJob(t, ns, n)
			c := meta.FindStatusCondition(j.Status.Conditions, shellv1alpha1.ShellJobScheduled)
			if c == nil {
				return false, "no Scheduled condition"
			}
			running, ok := texts.RunningOfUser(j)
			return c.Reason == shellv1alpha1.ShellJobScheduledReasonMaxRunningPerUser && ok && running == 2 &&
				j.Status.Phase == shellv1alpha1.PhaseQueued, fmt.Sprintf("%s %s: %s", j.Status.Phase, c.Reason, c.Message)
		})
	}
	// a1's end frees a worker and a seat of alice's: her oldest waiting
	// job, a3, takes them.
	end := func(name string) {
		j := getJob(t, ns, name)
		agent.exit(podKey(j), string(j.UID), 0)
		waitPhase(t, ns, name, shellv1alpha1.PhaseSucceeded)
	}
	end("a1")
	waitRunning(t, ns, alice, "a2", "a3")
	// A Direct job never waits for a free worker, but waits for alice's.
	createJob(t, utiltesting.MakeShellJob("a6-direct", ns).Pool("dev").User("alice").Mode(shellv1alpha1.ModeDirect).Command("sleep 100"))
	eventually(t, waitShort, "alice's Direct job waiting", func() (bool, string) {
		j := getJob(t, ns, "a6-direct")
		_, ok := texts.RunningOfUser(j)
		return ok && !j.Status.Ran, fmt.Sprint(j.Status.Conditions)
	})
	// A worker of bob's comes free: alice's jobs still wait, for her own,
	// and bob's next job takes it.
	end("b1")
	createJob(t, utiltesting.MakeShellJob("b3", ns).Pool("dev").User("bob").Command("sleep 100"))
	waitRunning(t, ns, append(bob, "b3"), "b2", "b3")
	waitRunning(t, ns, alice, "a2", "a3")
	end("a2")
	end("a3")
	waitRunning(t, ns, append(alice, "a6-direct"), "a4", "a5")
	end("a4")
	waitRunning(t, ns, append(alice, "a6-direct"), "a5", "a6-direct")
	for _, n := range []string{"a5", "a6-direct", "b2", "b3"} {
		end(n)
	}
	// Each job started once.
	starts := 0
	for _, c := range agent.callLog() {
		if strings.HasPrefix(c, "start ") {
			starts++
		}
	}
	if starts != 9 {
		t.Errorf("%d starts, want 9", starts)
	}
}
