//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	jobstate "shelljob.dev/shelljob/internal/shelljob"
	"shelljob.dev/shelljob/internal/texts"
)

// jobQuota is the chart's ResourceQuota on the count of ShellJobs.
func jobQuota(t *testing.T) *corev1.ResourceQuota {
	t.Helper()
	var list corev1.ResourceQuotaList
	if err := c.List(context.Background(), &list, client.InNamespace(Namespace)); err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		if _, ok := list.Items[i].Spec.Hard[jobstate.QuotaResource]; ok {
			return &list.Items[i]
		}
	}
	t.Fatalf("no ResourceQuota of %s in %s: the chart sets one (jobQuota)", jobstate.QuotaResource, Namespace)
	return nil
}

// setJobQuota sets the chart's quota to n jobs and waits until the quota
// controller has counted it (status.hard, which admission goes by).
func setJobQuota(t *testing.T, n int64) {
	t.Helper()
	run(t, "-n", Namespace, "patch", "resourcequota", jobQuota(t).Name, "--type=merge",
		"-p", fmt.Sprintf(`{"spec":{"hard":{%q:"%d"}}}`, jobstate.QuotaResource, n))
	poll(t, JobTimeout, fmt.Sprintf("the quota of %d jobs counted", n), func() (bool, string) {
		q := jobQuota(t)
		// Counted: the quota controller wrote the new hard limit and a
		// use, which is 0 in an empty namespace.
		hard := q.Status.Hard[jobstate.QuotaResource]
		used, counted := q.Status.Used[jobstate.QuotaResource]
		return hard.Value() == n && counted, fmt.Sprintf("status hard %s, used %s", hard.String(), used.String())
	})
}

// TestQuotaFull: with the chart's ShellJob quota full, as the API server's
// ResourceQuota admission and the cluster's quota controller enforce it, a
// chat command and `kubectl shelljob exec` are refused with words that
// say so, and both work again once there is room.
func TestQuotaFull(t *testing.T) {
	EnsurePool(t, EnsurePoolInput{Name: Pool, Replicas: PoolSize})
	p := Chats(t)
	quota := jobQuota(t)
	limit := quota.Spec.Hard[jobstate.QuotaResource]
	t.Cleanup(func() { setJobQuota(t, limit.Value()) })
	// One job of its own stays while the quota is 1: however many others
	// come and go, there is no room.
	WaitForJobEnd(t, Create(t, Job(t, "quota", "true"))[0], JobTimeout)
	setJobQuota(t, 1)

	r := shelljob(t, "", "exec", "--pool", Pool, "--", "echo", "hi")
	if want := fmt.Sprintf("(ResourceQuota %s); finished jobs count until they expire or are deleted\n", quota.Name); r.code != 1 ||
		!strings.HasPrefix(r.errOut, "error: create shelljob in namespace "+Namespace+": the ShellJob quota is full: ") ||
		!strings.HasSuffix(r.errOut, want) || r.out != "" {
		t.Errorf("kubectl shelljob exec under the full quota: exit %d, stdout %q, stderr %q", r.code, r.out, r.errOut)
	}
	if got := p.Group.Answer(p.Group.Send(".a echo hi")); got != texts.QuotaFull(1) {
		t.Errorf("the chat's answer under the full quota: %q, want %q", got, texts.QuotaFull(1))
	}

	setJobQuota(t, limit.Value())
	if r := shelljob(t, "", "exec", "--pool", Pool, "--", "echo", "room"); r.code != 0 || r.out != "room\n" {
		t.Errorf("kubectl shelljob exec with room again: exit %d, %q, %q", r.code, r.out, r.errOut)
	}
	if fin := p.Group.Final(p.Group.Send(".a echo room"), FinalTimeout); !strings.HasPrefix(fin.Text, "room") {
		t.Errorf("the chat's final with room again: %q", fin.Text)
	}
}
