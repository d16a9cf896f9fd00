package bot_test

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/texts"
)

// TestQuotaFull: a command that the namespace's full ShellJob quota
// refuses (the API server's ResourceQuota admission) is answered in words,
// and the bot goes on.
func TestQuotaFull(t *testing.T) {
	e := newEnv(t, envOptions{})
	apiServer.FullJobQuota(t, e.cluster.Namespace, 5)
	since := e.srv.Seq()
	m := e.send(e.admin, e.group, ".a echo hi")
	ev := e.wait(since, "the reply", sendTo(e.group, m.ID))
	if want := texts.QuotaFull(5); ev.Text != want {
		t.Errorf("reply %q, want %q", ev.Text, want)
	}
	var list shellv1alpha1.ShellJobList
	if err := e.cluster.Client.List(e.ctx, &list, client.InNamespace(e.cluster.Namespace)); err != nil || len(list.Items) != 0 {
		t.Errorf("%d jobs, %v: want none", len(list.Items), err)
	}
}
