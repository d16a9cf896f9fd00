package kubetest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/clustertest"
	"shelljob.dev/shelljob/internal/shelljob"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

type result struct {
	out, errOut string
	code        int
}

// execAsync runs the plugin's exec as user in the background.
func execAsync(ctx context.Context, t *testing.T, cl *clustertest.Cluster, user string, args ...string) <-chan result {
	done := make(chan result, 1)
	go func() {
		out, errOut, code := pluginOn(ctx, t, cl, user, append([]string{"exec", "--pool", cl.Pool, "--"}, args...)...)
		done <- result{out, errOut, code}
	}()
	return done
}

// jobOf waits for the job of command, until it holds.
func jobOf(ctx context.Context, t *testing.T, cl *clustertest.Cluster, command string, holds func(*shellv1alpha1.ShellJob) bool) *shellv1alpha1.ShellJob {
	t.Helper()
	for ctx.Err() == nil {
		var list shellv1alpha1.ShellJobList
		if err := cl.Client.List(ctx, &list, client.InNamespace(cl.Namespace)); err != nil {
			t.Fatal(err)
		}
		for i := range list.Items {
			if j := &list.Items[i]; j.Spec.Command == command && holds(j) {
				return j
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no job of %q as wanted", command)
	return nil
}

func patchPool(ctx context.Context, t *testing.T, cl *clustertest.Cluster, edit func(*shellv1alpha1.ShellPool)) {
	t.Helper()
	var pool shellv1alpha1.ShellPool
	if err := cl.Client.Get(ctx, client.ObjectKey{Namespace: cl.Namespace, Name: cl.Pool}, &pool); err != nil {
		t.Fatal(err)
	}
	base := pool.DeepCopy()
	edit(&pool)
	if err := cl.Client.Patch(ctx, &pool, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}

// TestApproveAndDeny: on a pool that requires approval, `kubectl shelljob
// exec` says its job waits, and ends as the decision says: it runs once
// approved, and exits 126 with the chat's note once denied. approve and
// deny record a person's decision, and print the API server's refusal as
// it is.
func TestApproveAndDeny(t *testing.T) {
	cl := clustertest.Start(t, env, clustertest.Options{Pool: "prod", Workers: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	patchPool(ctx, t, cl, func(p *shellv1alpha1.ShellPool) {
		p.Spec.Approval = &shellv1alpha1.ShellPoolApproval{TimeoutSeconds: 600}
	})
	// The origin policy, so that a job names its author, and the approval
	// policy; the API server picks them up within a few seconds.
	applyPolicy(t, "origin.yaml", nil)
	applyPolicy(t, "approval.yaml", nil)
	own := utiltesting.MakeShellJob("own", cl.Namespace).User("bob").Pool(cl.Pool).Approval(shellv1alpha1.ApprovalApproved, "bob").Obj()
	forged := utiltesting.MakeShellJob("forged", cl.Namespace).User("alice").Pool(cl.Pool).Obj()
	for _, canary := range []struct {
		j    *shellv1alpha1.ShellJob
		want string
	}{{own, "is your own job"}, {forged, "must be the user who creates it"}} {
		for ctx.Err() == nil {
			if err := as(t, "bob").Create(ctx, canary.j.DeepCopy(), client.DryRunAll); err != nil && strings.Contains(err.Error(), canary.want) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	approved := execAsync(ctx, t, cl, "bob", "echo", "approved")
	j := jobOf(ctx, t, cl, "echo approved", shelljob.IsAwaitingApproval)
	n := "#" + itoa(j.Status.Number)
	if out, errOut, code := pluginOn(ctx, t, cl, "erin", "ls"); code != 0 || !regexpLine(out, itoa(j.Status.Number), j.Name) ||
		!strings.Contains(out, "AwaitingApproval") || !strings.Contains(out, "bob") {
		t.Errorf("ls: exit %d\n%s%s", code, out, errOut)
	}
	if out, errOut, code := pluginOn(ctx, t, cl, "bob", "approve", n); code != 1 || out != "" ||
		!strings.Contains(errOut, "is forbidden: ValidatingAdmissionPolicy") || !strings.Contains(errOut, n+" is your own job: someone else must approve or deny it") {
		t.Errorf("bob approves his own: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if out, errOut, code := pluginOn(ctx, t, cl, "erin", "approve", n); code != 0 || out != "✅ Approved "+n+".\n" {
		t.Errorf("erin approves: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	r := <-approved
	if r.code != 0 || r.out != "approved\n" || !strings.Contains(r.errOut, "⏳ "+n+" waiting for approval") {
		t.Errorf("the approved exec: exit %d, stdout %q, stderr %q", r.code, r.out, r.errOut)
	}
	if out, _, code := pluginOn(ctx, t, cl, "erin", "approve", n); code != 0 || out != n+" was already approved by erin.\n" {
		t.Errorf("approve again: exit %d, %q", code, out)
	}

	denied := execAsync(ctx, t, cl, "bob", "echo", "never")
	j = jobOf(ctx, t, cl, "echo never", shelljob.IsAwaitingApproval)
	n = "#" + itoa(j.Status.Number)
	if out, errOut, code := pluginOn(ctx, t, cl, "erin", "deny", j.Name); code != 0 || out != "⛔ Denied "+n+".\n" {
		t.Errorf("erin denies: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	r = <-denied
	if r.code != 126 || r.out != "" || !strings.Contains(r.errOut, "⛔ Denied by erin.") {
		t.Errorf("the denied exec: exit %d, stdout %q, stderr %q", r.code, r.out, r.errOut)
	}

	// A job of a pool that requires none: a decision would change nothing.
	free := utiltesting.MakeShellPool("free", cl.Namespace).Replicas(1).Obj()
	if err := cl.Client.Create(ctx, free); err != nil {
		t.Fatal(err)
	}
	anywhere := utiltesting.MakeShellJob("anywhere", cl.Namespace).User("dave").Pool("free").Command("sleep 1").Obj()
	if err := as(t, "dave").Create(ctx, anywhere); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := pluginOn(ctx, t, cl, "erin", "approve", "anywhere"); code != 1 || !strings.Contains(errOut, "does not wait for approval: pool free requires none") {
		t.Errorf("approve on a pool with no approval: exit %d, %q", code, errOut)
	}
}

// TestExecWaitsForOwnJobs: a job held back by its pool's maxRunningPerUser
// says so in the terminal, and runs once its author's other job ends.
func TestExecWaitsForOwnJobs(t *testing.T) {
	cl := clustertest.Start(t, env, clustertest.Options{Pool: "dev", Workers: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	patchPool(ctx, t, cl, func(p *shellv1alpha1.ShellPool) { p.Spec.MaxRunningPerUser = ptr.To[int32](1) })
	first := execAsync(ctx, t, cl, "bob", "sleep 2; echo one")
	jobOf(ctx, t, cl, "sleep 2; echo one", shelljob.IsStarted)
	out, errOut, code := pluginOn(ctx, t, cl, "bob", "exec", "--pool", cl.Pool, "--", "echo", "two")
	if code != 0 || out != "two\n" || !strings.Contains(errOut, "waiting: 1 of your commands is running") {
		t.Errorf("the second exec: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if r := <-first; r.code != 0 || r.out != "one\n" {
		t.Errorf("the first exec: exit %d, stdout %q, stderr %q", r.code, r.out, r.errOut)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
