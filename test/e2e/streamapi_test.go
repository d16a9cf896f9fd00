//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	streamv1alpha1 "shelljob.dev/shelljob/api/stream/v1alpha1"
	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/streamclient"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

// logPath is the path of a job's log in the stream API.
func logPath(j *shellv1alpha1.ShellJob) string {
	return fmt.Sprintf("/apis/%s/namespaces/%s/%s/%s/%s", streamv1alpha1.GroupVersion, j.Namespace, streamv1alpha1.Resource, j.Name, streamv1alpha1.SubresourceLog)
}

// grantUsers gives users a Role of rules in Namespace until the end of
// the test.
func grantUsers(t *testing.T, users []string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	name := "e2e-" + testLabel(t)
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace}, Rules: rules}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
	}
	for _, u := range users {
		binding.Subjects = append(binding.Subjects, rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: u})
	}
	for _, obj := range []client.Object{role, binding} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), obj) })
	}
}

// as is the suite's client impersonating user, an authenticated user of
// no other group.
func as(t *testing.T, user string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(restConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	cl, err := client.New(cfg, client.Options{Scheme: c.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// TestStreamAPILog: through the real aggregation layer, a job's owner
// reads its log with kubectl get --raw, and another user who may create
// jobs too is refused with Forbidden; so is the owner for a job of
// someone else's, which an admin reads. (envtest's suite,
// internal/streamapi, proves the Telegram jobs' rule.)
func TestStreamAPILog(t *testing.T) {
	EnsurePool(t, EnsurePoolInput{Name: Pool, Replicas: PoolSize})
	owner, other := "e2e-stream-owner", "e2e-stream-other"
	grantUsers(t, []string{owner, other}, rbacv1.PolicyRule{
		APIGroups: []string{shellv1alpha1.GroupVersion.Group}, Resources: []string{"shelljobs"}, Verbs: []string{"create", "get", "list", "watch"},
	})
	j := Job(t, "stream-log", "echo hello from the stream API").
		Origin(shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginCLI, User: owner}).Obj()
	if err := as(t, owner).Create(context.Background(), j); err != nil {
		t.Fatalf("create as %s: %v", owner, err)
	}
	j = WaitForJobEnd(t, j, JobTimeout)

	if got := run(t, "get", "--raw", logPath(j), "--as", owner, "--as-group", "system:authenticated"); got != "hello from the stream API\n" {
		t.Errorf("the owner's log = %q", got)
	}
	var stderr bytes.Buffer
	cmd := kubectlCmd("get", "--raw", logPath(j), "--as", other, "--as-group", "system:authenticated")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err == nil || !strings.Contains(stderr.String(), "Forbidden") {
		t.Errorf("another user's read: %q, %v, %s; want Forbidden", out, err, stderr.String())
	}

	// A job of the suite's user (an admin, who reads any job).
	chat := Create(t, Job(t, "stream-chat", "echo from the chat"))[0]
	chat = WaitForJobEnd(t, chat, JobTimeout)
	if got := run(t, "get", "--raw", logPath(chat)); got != "from the chat\n" {
		t.Errorf("the admin's read of a job = %q", got)
	}
	stderr.Reset()
	cmd = kubectlCmd("get", "--raw", logPath(chat), "--as", owner, "--as-group", "system:authenticated")
	cmd.Stderr = &stderr
	if out, err := cmd.Output(); err == nil || !strings.Contains(stderr.String(), "Forbidden") {
		t.Errorf("a user's read of a job not theirs: %q, %v, %s; want Forbidden", out, err, stderr.String())
	}
}

// TestStreamAPIDiscovery: the group is in discovery, and discovery is
// whole: kubectl api-resources lists no error (its resources are
// subresources and their verbless parent, which it does not list).
func TestStreamAPIDiscovery(t *testing.T) {
	if versions := run(t, "api-versions"); !strings.Contains(versions, streamv1alpha1.GroupVersion.String()+"\n") {
		t.Errorf("kubectl api-versions lacks %s:\n%s", streamv1alpha1.GroupVersion, versions)
	}
	var stderr bytes.Buffer
	cmd := kubectlCmd("api-resources")
	cmd.Stderr = &stderr
	if _, err := cmd.Output(); err != nil || stderr.Len() > 0 {
		t.Errorf("kubectl api-resources: %v\n%s", err, stderr.String())
	}
	list := run(t, "get", "--raw", "/apis/"+streamv1alpha1.GroupVersion.String())
	for _, sub := range []string{streamv1alpha1.SubresourceLog, streamv1alpha1.SubresourceFiles, streamv1alpha1.SubresourceAttach} {
		if !strings.Contains(list, `"shelljobs/`+sub+`"`) {
			t.Errorf("discovery of %s lacks shelljobs/%s:\n%s", streamv1alpha1.GroupVersion, sub, list)
		}
	}
}

// TestStreamAPIFollowAcrossOperatorRestart: a follow through the
// aggregation layer, cut when the operator's pods are deleted, resumes
// from its offset once a replica serves again, with nothing lost and
// nothing twice.
func TestStreamAPIFollowAcrossOperatorRestart(t *testing.T) {
	EnsurePool(t, EnsurePoolInput{Name: Pool, Replicas: PoolSize})
	const lines = 60
	var want strings.Builder
	for i := 1; i <= lines; i++ {
		fmt.Fprintf(&want, "line %d\n", i)
	}
	j := Create(t, Job(t, "stream-restart", fmt.Sprintf("for i in {1..%d}; do echo line $i; sleep 0.5; done", lines)))[0]
	var (
		mu      sync.Mutex
		resumed []error
	)
	sc, err := streamclient.New(restConfig, streamclient.Options{Namespace: Namespace, OnResume: func(_ string, _ int64, err error) {
		mu.Lock()
		defer mu.Unlock()
		resumed = append(resumed, err)
	}})
	if err != nil {
		t.Fatal(err)
	}
	var out utiltesting.SyncBuffer
	done := make(chan error, 1)
	ctx, cancel := context.WithTimeout(context.Background(), OperatorRestartTimeout+JobTimeout)
	defer cancel()
	go func() {
		_, err := sc.Follow(ctx, j.Name, agentapi.AwaitStart, &out)
		done <- err
	}()
	poll(t, JobTimeout, "the follow's fifth line", func() (bool, string) {
		return strings.Contains(out.String(), "line 5\n"), out.String()
	})
	run(t, "-n", Namespace, "delete", "pod", "-l", "app.kubernetes.io/name=shelljob-operator", "--wait=false")
	select {
	case err = <-done:
	case <-ctx.Done():
		err = errors.New("the follow did not end")
	}
	if err != nil {
		t.Fatalf("follow: %v; got %q", err, out.String())
	}
	if out.String() != want.String() {
		t.Errorf("output across the restart = %q, want %q", out.String(), want.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(resumed) == 0 {
		t.Error("the follow was never cut: did the deleted pods serve it?")
	}
	t.Logf("resumed after %v", resumed)
}
