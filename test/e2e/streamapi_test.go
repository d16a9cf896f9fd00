//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	streamv1alpha1 "shelljob.dev/shelljob/api/stream/v1alpha1"
	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/streamclient"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

// logPath is the path of a job's log in the stream API, through
// resource: streamv1alpha1.Resource (any job) or OwnResource (one's own).
func logPath(j *shellv1alpha1.ShellJob, resource string) string {
	return fmt.Sprintf("/apis/%s/namespaces/%s/%s/%s/%s", streamv1alpha1.GroupVersion, j.Namespace, resource, j.Name, streamv1alpha1.SubresourceLog)
}

// controlPlaneNode is the kind control plane's container, whose API
// server writes its audit log at auditLog (hack/lib.sh's AUDIT_LOG).
const (
	controlPlaneNode = "shelljob-control-plane"
	auditLog         = "/var/log/kubernetes/audit/audit.log"
)

// auditEvent is what the tests read of an audit event.
type auditEvent struct {
	AuditID string `json:"auditID"`
	Stage   string `json:"stage"`
	Verb    string `json:"verb"`
	User    struct {
		Username string `json:"username"`
	} `json:"user"`
	ImpersonatedUser *struct {
		Username string `json:"username"`
	} `json:"impersonatedUser"`
	ObjectRef *struct {
		APIGroup    string `json:"apiGroup"`
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// reader is who an audit event says made the request (a read, a create,
// a stop): the impersonated user, when there is one.
func (e auditEvent) reader() string {
	if e.ImpersonatedUser != nil {
		return e.ImpersonatedUser.Username
	}
	return e.User.Username
}

// auditedReads are the requests for the job's subresource sub through
// resource in the API server's audit log, as they completed or, for a
// long-running one (a follow), as its response started: a follow its
// reader hangs up on before its end (the bot, once it has the final) ends
// in the stage Panic, the API server's way to abort a proxied response.
func auditedReads(t *testing.T, j *shellv1alpha1.ShellJob, resource, sub string) []auditEvent {
	t.Helper()
	out, err := dockerExec(controlPlaneNode, "grep", "-F", `"name":"`+j.Name+`"`, auditLog)
	if err != nil {
		return nil
	}
	var events []auditEvent
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var e auditEvent
		if json.Unmarshal([]byte(line), &e) != nil || (e.Stage != "ResponseComplete" && e.Stage != "ResponseStarted") || e.ObjectRef == nil {
			continue
		}
		if r := e.ObjectRef; r.APIGroup == streamv1alpha1.GroupName && r.Resource == resource && r.Subresource == sub && r.Namespace == j.Namespace {
			events = append(events, e)
		}
	}
	return events
}

// shelljobUsers binds users to the chart's shelljob-user ClusterRole in
// Namespace, and gives them use of the e2e pool, as the chart's
// pools[].users would, and nothing else, until the end of the test.
func shelljobUsers(t *testing.T, users ...string) {
	t.Helper()
	name := "e2e-" + testLabel(t)
	var as []string
	for _, u := range users {
		as = append(as, "--user="+u)
	}
	run(t, append([]string{"-n", Namespace, "create", "rolebinding", name, "--clusterrole=shelljob-" + Namespace + "-shelljob-user"}, as...)...)
	t.Cleanup(func() { _, _ = kubectlCmd("-n", Namespace, "delete", "rolebinding", name).CombinedOutput() })
	// kubectl create role refuses a verb that the resource's discovery
	// does not list, as use: the role is made through the API.
	use := name + "-use"
	createGone(t, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: use},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{shellv1alpha1.GroupVersion.Group}, Resources: []string{"shellpools"}, ResourceNames: []string{Pool}, Verbs: []string{"use"}}}})
	run(t, append([]string{"-n", Namespace, "create", "rolebinding", use, "--role=" + use}, as...)...)
	t.Cleanup(func() { _, _ = kubectlCmd("-n", Namespace, "delete", "rolebinding", use).CombinedOutput() })
}

// asUser is kubectl's flags that impersonate user, an authenticated user
// of no other group.
func asUser(user string) []string {
	return []string{"--as", user, "--as-group", "system:authenticated"}
}

// refused runs kubectl ARGS, which must fail with Forbidden, and returns
// what it said.
func refused(t *testing.T, what string, args ...string) string {
	t.Helper()
	var stderr bytes.Buffer
	cmd := kubectlCmd(args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err == nil || !strings.Contains(stderr.String(), "Forbidden") && !strings.Contains(stderr.String(), "forbidden") {
		t.Errorf("%s: %q, %v, %s; want Forbidden", what, out, err, stderr.String())
	}
	return stderr.String()
}

// TestStreamAPILog: through the real aggregation layer, users bound to
// the chart's shelljob-user alone run jobs with kubectl shelljob (exec
// with files out, logs) and read their own jobs' output through
// myshelljobs; the API server refuses them shelljobs (any job's log),
// and the stream API another user's job and a Telegram job of an older
// bot's form with Forbidden; neither they nor the bot exec into a worker;
// an admin reads any job through shelljobs; and the API server's audit
// log names the reader of each log read.
func TestStreamAPILog(t *testing.T) {
	EnsurePool(t, EnsurePoolInput{Name: Pool, Replicas: PoolSize})
	owner, other := "e2e-stream-owner", "e2e-stream-other"
	shelljobUsers(t, owner, other)

	// The owner's exec, with a file out, through kubectl shelljob.
	dir := t.TempDir()
	r := shelljob(t, "", append(asUser(owner), "exec", "--pool", Pool, "--output-dir", dir, "--",
		`echo hello from the stream API; echo kept > "$SHELLJOB_OUT/a.txt"`)...)
	if r.code != 0 || r.out != "hello from the stream API\n" {
		t.Fatalf("exec as %s: exit %d, %q, %q", owner, r.code, r.out, r.errOut)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "a.txt")); err != nil || string(b) != "kept\n" {
		t.Errorf("the file out of the owner's job: %q, %v; exec said %q", b, err, r.errOut)
	}
	var jobs shellv1alpha1.ShellJobList
	if err := c.List(context.Background(), &jobs, client.InNamespace(Namespace)); err != nil {
		t.Fatal(err)
	}
	var j *shellv1alpha1.ShellJob
	for i := range jobs.Items {
		if o := jobs.Items[i].Spec.Origin; o.Source == shellv1alpha1.OriginCLI && o.User == owner && strings.Contains(jobs.Items[i].Spec.Command, "hello from the stream API") {
			j = &jobs.Items[i]
		}
	}
	if j == nil {
		t.Fatalf("no job of %s's exec", owner)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), j) })
	j = WaitForJobEnd(t, j, JobTimeout)
	// Delivered by kubectl shelljob, the job settles: the operator's cache
	// lets it go, and the stream API reads it from the API server.
	poll(t, JobTimeout, "the delivered job settled", func() (bool, string) {
		j = Get(t, j)
		_, ok := j.Labels[shellv1alpha1.LabelExpires]
		return ok, fmt.Sprint(j.Labels)
	})

	// The owner reads it again: kubectl shelljob logs (refused shelljobs,
	// it reads myshelljobs), and kubectl get --raw of myshelljobs.
	if r := shelljob(t, "", append(asUser(owner), "logs", j.Name)...); r.code != 0 || r.out != "hello from the stream API\n" {
		t.Errorf("logs as the owner: exit %d, %q, %q", r.code, r.out, r.errOut)
	}
	if got := run(t, append([]string{"get", "--raw", logPath(j, streamv1alpha1.OwnResource)}, asUser(owner)...)...); got != "hello from the stream API\n" {
		t.Errorf("the owner's log through myshelljobs = %q", got)
	}
	// shelljobs is any job's: the API server refuses it to the owner.
	refused(t, "the owner's read through shelljobs", append([]string{"get", "--raw", logPath(j, streamv1alpha1.Resource)}, asUser(owner)...)...)

	// Another user: refused by the stream API, which says whose job it is
	// not, through kubectl shelljob logs and through kubectl get --raw.
	if r := shelljob(t, "", append(asUser(other), "logs", j.Name)...); r.code == 0 || !strings.Contains(r.errOut, "Forbidden") && !strings.Contains(r.errOut, "forbidden") ||
		!strings.Contains(r.errOut, "is not "+other+"'s") || strings.Contains(r.out, "hello") {
		t.Errorf("logs of the owner's job as another user: exit %d, %q, %q; want Forbidden", r.code, r.out, r.errOut)
	}
	refused(t, "another user's read through myshelljobs", append([]string{"get", "--raw", logPath(j, streamv1alpha1.OwnResource)}, asUser(other)...)...)

	// An older bot's Telegram job (its user a Telegram id) is nobody's own:
	// the origin policy lets no one create one any more, so the stream
	// API's envtest proves it (TestLogWho). The suite's user, an admin,
	// reads any job through shelljobs.
	if got := run(t, "get", "--raw", logPath(j, streamv1alpha1.Resource)); got != "hello from the stream API\n" {
		t.Errorf("the admin's read of the owner's job = %q", got)
	}

	// No exec into a worker, where the owner's job ran.
	refused(t, "kubectl exec into a worker as a user", append([]string{"-n", WorkerNamespace, "exec", j.Status.Pod, "-c", agentapi.WorkerContainer}, append(asUser(owner), "--", "true")...)...)
	// Nor as the bot's ServiceAccount, in the workers' namespace or its own:
	// the bot reads through the stream API alone.
	bot := []string{"--as", "system:serviceaccount:" + Namespace + ":" + BotDeployment}
	refused(t, "kubectl exec into a worker as the bot", append([]string{"-n", WorkerNamespace, "exec", j.Status.Pod, "-c", agentapi.WorkerContainer}, append(bot, "--", "true")...)...)
	for _, ns := range []string{WorkerNamespace, Namespace} {
		if out, _ := kubectlCmd(append([]string{"auth", "can-i", "create", "pods", "--subresource=exec", "-n", ns}, bot...)...).Output(); strings.TrimSpace(string(out)) != "no" {
			t.Errorf("the bot may exec into the pods of %s: %q", ns, out)
		}
	}

	// The audit log names the reader of each read, and the refused one.
	poll(t, JobTimeout, "the audit log's reads of "+j.Name, func() (bool, string) {
		var ok, refusedOther bool
		var seen []string
		for _, e := range auditedReads(t, j, streamv1alpha1.OwnResource, streamv1alpha1.SubresourceLog) {
			code := 0
			if e.ResponseStatus != nil {
				code = e.ResponseStatus.Code
			}
			ok = ok || e.reader() == owner && e.Verb == "get" && code == 200
			refusedOther = refusedOther || e.reader() == other && code == 403
			seen = append(seen, fmt.Sprintf("%s %s %d", e.reader(), e.Verb, code))
		}
		return ok && refusedOther, strings.Join(seen, "; ")
	})
}

// TestStreamAPIDiscovery: the group is in discovery, and discovery is
// whole: kubectl api-resources lists no error (its resources are
// subresources and their verbless parents, which it does not list), and
// both shelljobs and myshelljobs are there with each subresource.
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
	for _, resource := range []string{streamv1alpha1.Resource, streamv1alpha1.OwnResource} {
		for _, sub := range []string{streamv1alpha1.SubresourceLog, streamv1alpha1.SubresourceFiles, streamv1alpha1.SubresourceAttach} {
			if !strings.Contains(list, `"`+resource+`/`+sub+`"`) {
				t.Errorf("discovery of %s lacks %s/%s:\n%s", streamv1alpha1.GroupVersion, resource, sub, list)
			}
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
