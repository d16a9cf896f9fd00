package chart_test

import (
	"context"
	"os"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/charttest"
	"shelljob.dev/shelljob/internal/testenv"
)

// startAPIServer starts envtest, skipping without KUBEBUILDER_ASSETS except
// on CI (CI=true), where it fails.
func startAPIServer(t *testing.T) *testenv.Env {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" && os.Getenv("CI") != "true" {
		t.Skip(testenv.ErrNoAssets)
	}
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop envtest: %v", err)
		}
	})
	return env
}

// install creates every object of the rendered chart on the API server,
// refusing unknown fields.
func install(t *testing.T, c client.Client, manifests []byte) []*unstructured.Unstructured {
	t.Helper()
	objs := charttest.Objects(t, manifests)
	charttest.Create(t, c, objs)
	return objs
}

type access struct {
	verb, group, resource, subresource, name, namespace string
	// path is a non-resource URL, such as /metrics; it replaces the
	// resource.
	path string
}

// allowed asks the API server whether the ServiceAccount sa of the release
// namespace may do a.
func allowed(t *testing.T, c client.Client, sa string, a access) bool {
	t.Helper()
	return allowedAs(t, c, "system:serviceaccount:"+namespace+":"+sa,
		[]string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}, a)
}

// allowedAs asks the API server whether user, of groups, may do a.
func allowedAs(t *testing.T, c client.Client, user string, groups []string, a access) bool {
	t.Helper()
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: groups}}
	if a.path != "" {
		review.Spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: a.path, Verb: a.verb}
	} else {
		review.Spec.ResourceAttributes = &authorizationv1.ResourceAttributes{
			Namespace: a.namespace, Verb: a.verb, Group: a.group, Resource: a.resource,
			Subresource: a.subresource, Name: a.name,
		}
	}
	if err := c.Create(context.Background(), review); err != nil {
		t.Fatalf("SubjectAccessReview: %v", err)
	}
	return review.Status.Allowed
}

// TestOnAPIServer installs the chart on envtest's API server, then checks
// what the operator's and the bot's ServiceAccounts may do. TestAccess
// checks what people may do, and the admission policies.
func TestOnAPIServer(t *testing.T) {
	env := startAPIServer(t)
	ctx := context.Background()
	c := env.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		t.Fatal(err)
	}
	install(t, c, valueSets[0].render(t,
		"--set", "bot.token=123:abc", "--set", "bot.appId=17349", "--set", "bot.appHash=f00d", "--set", "bot.admins={1}"))
	workers := valueSets[0].workers
	// What the chart's comment asks of an installer whose Prometheus
	// scrapes the operator.
	if err := c.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "scraper-metrics"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: release + "-" + namespace + "-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "scraper", Namespace: namespace}},
	}); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		sa   string
		a    access
		want bool
	}{
		// The bot reaches no pod, and reads no job's output or files as
		// itself: it reads them as each job's sender, through the stream
		// API's myshelljobs (the telegram Role, TestAccess).
		{"shelljob-bot", access{verb: "create", resource: "pods", subresource: "exec", namespace: workers}, false},
		{"shelljob-bot", access{verb: "get", resource: "pods", subresource: "exec", namespace: workers}, false},
		{"shelljob-bot", access{verb: "create", resource: "pods", subresource: "exec", namespace: namespace}, false},
		{"shelljob-bot", access{verb: "create", resource: "pods", namespace: workers}, false},
		{"shelljob-bot", access{verb: "get", resource: "pods", namespace: workers}, false},
		{"shelljob-bot", access{verb: "list", resource: "pods", namespace: namespace}, false},
		{"shelljob-bot", access{verb: "get", group: "stream.shelljob.dev", resource: "shelljobs", subresource: "log", namespace: namespace}, false},
		{"shelljob-bot", access{verb: "get", group: "stream.shelljob.dev", resource: "shelljobs", subresource: "files", namespace: namespace}, false},
		{"shelljob-bot", access{verb: "create", group: "stream.shelljob.dev", resource: "shelljobs", subresource: "files", namespace: namespace}, false},
		{"shelljob-bot", access{verb: "update", group: "stream.shelljob.dev", resource: "shelljobs", subresource: "files", namespace: namespace}, false},
		{"shelljob-bot", access{verb: "get", group: "stream.shelljob.dev", resource: "myshelljobs", subresource: "log", namespace: namespace}, false},
		{"shelljob-bot", access{verb: "create", group: "stream.shelljob.dev", resource: "shelljobs", subresource: "attach", namespace: namespace}, false},
		{"shelljob-bot", access{verb: "get", group: "stream.shelljob.dev", resource: "shelljobs", subresource: "log", namespace: workers}, false},
		// As itself, the bot creates no job and restarts no pool: it does
		// that as the chat admin who asks (TestAccess).
		{"shelljob-bot", access{verb: "create", group: "shell.shelljob.dev", resource: "shelljobs", namespace: namespace}, false},
		{"shelljob-bot", access{verb: "patch", group: "shell.shelljob.dev", resource: "shelljobs", namespace: namespace}, true},
		{"shelljob-bot", access{verb: "delete", group: "shell.shelljob.dev", resource: "shelljobs", namespace: namespace}, false},
		{"shelljob-bot", access{verb: "patch", group: "shell.shelljob.dev", resource: "shellpools", name: "shell", namespace: namespace}, false},
		{"shelljob-bot", access{verb: "watch", group: "shell.shelljob.dev", resource: "shellpools", namespace: namespace}, true},
		{"shelljob-bot", access{verb: "delete", group: "shell.shelljob.dev", resource: "shellpools", name: "shell", namespace: namespace}, false},
		{"shelljob-bot", access{verb: "patch", group: "shell.shelljob.dev", resource: "shelljobs", subresource: "status", namespace: namespace}, false},
		{"shelljob-bot", access{verb: "get", resource: "secrets", name: "shelljob-bot-session", namespace: namespace}, true},
		{"shelljob-bot", access{verb: "get", resource: "secrets", name: "shelljob-bot", namespace: namespace}, false},
		{"shelljob-bot", access{verb: "update", resource: "configmaps", name: "shelljob-bot-settings", namespace: namespace}, true},
		{"shelljob-bot", access{verb: "update", resource: "configmaps", name: "shelljob-counter", namespace: namespace}, false},
		{"shelljob-operator", access{verb: "create", resource: "pods", namespace: workers}, true},
		{"shelljob-operator", access{verb: "delete", resource: "pods", namespace: workers}, true},
		{"shelljob-operator", access{verb: "create", resource: "pods", subresource: "exec", namespace: workers}, true},
		{"shelljob-operator", access{verb: "create", resource: "pods", namespace: namespace}, false},
		{"shelljob-operator", access{verb: "create", resource: "pods", subresource: "exec", namespace: namespace}, false},
		{"shelljob-operator", access{verb: "patch", group: "shell.shelljob.dev", resource: "shelljobs", subresource: "status", namespace: namespace}, true},
		{"shelljob-operator", access{verb: "update", group: "shell.shelljob.dev", resource: "shellpools", subresource: "finalizers", namespace: namespace}, true},
		{"shelljob-operator", access{verb: "update", resource: "configmaps", name: "shelljob-counter", namespace: namespace}, true},
		{"shelljob-operator", access{verb: "update", group: "coordination.k8s.io", resource: "leases", name: "shelljob-operator.shell.shelljob.dev", namespace: namespace}, true},
		{"shelljob-operator", access{verb: "create", group: "authentication.k8s.io", resource: "tokenreviews"}, true},
		{"shelljob-operator", access{verb: "create", group: "authorization.k8s.io", resource: "subjectaccessreviews"}, true},
		{"shelljob-operator", access{verb: "get", path: "/metrics"}, false},
		// A scraper that the metrics-reader ClusterRole is bound to below.
		{"scraper", access{verb: "get", path: "/metrics"}, true},
		{"scraper", access{verb: "get", path: "/debug/pprof/"}, false},
		{"scraper", access{verb: "get", resource: "pods", namespace: namespace}, false},
		{"shelljob-operator", access{verb: "get", resource: "secrets", namespace: namespace}, false},
		{"shelljob-operator", access{verb: "list", resource: "pods", namespace: "kube-system"}, false},
		// The NetworkPolicy reconciler: Nodes read, its policies written
		// in its two namespaces alone, the API server's endpoints read.
		{"shelljob-operator", access{verb: "list", resource: "nodes"}, true},
		{"shelljob-operator", access{verb: "watch", resource: "nodes"}, true},
		{"shelljob-operator", access{verb: "patch", resource: "nodes"}, false},
		{"shelljob-operator", access{verb: "update", group: "networking.k8s.io", resource: "networkpolicies", namespace: workers}, true},
		{"shelljob-operator", access{verb: "create", group: "networking.k8s.io", resource: "networkpolicies", namespace: namespace}, true},
		{"shelljob-operator", access{verb: "create", group: "networking.k8s.io", resource: "networkpolicies", namespace: "kube-system"}, false},
		{"shelljob-operator", access{verb: "watch", group: "discovery.k8s.io", resource: "endpointslices", namespace: "default"}, true},
		{"shelljob-operator", access{verb: "list", group: "discovery.k8s.io", resource: "endpointslices", namespace: "kube-system"}, false},
		{"shelljob-bot", access{verb: "list", resource: "nodes"}, false},
		// The stream API's delegated authentication and authorization
		// (system:auth-delegator, extension-apiserver-authentication-reader).
		{"shelljob-operator", access{verb: "get", resource: "configmaps", name: "extension-apiserver-authentication", namespace: "kube-system"}, true},
		{"shelljob-operator", access{verb: "watch", resource: "configmaps", name: "extension-apiserver-authentication", namespace: "kube-system"}, true},
		{"shelljob-operator", access{verb: "watch", resource: "configmaps", namespace: "kube-system"}, false},
		{"shelljob-operator", access{verb: "update", resource: "configmaps", name: "extension-apiserver-authentication", namespace: "kube-system"}, false},
		{"shelljob-operator", access{verb: "get", resource: "secrets", namespace: "kube-system"}, false},
	} {
		a := tc.a
		if got := allowed(t, c, tc.sa, a); got != tc.want {
			t.Errorf("%s: %s %s %s/%s %q in %q%s: allowed %v, want %v", tc.sa, a.verb, a.group, a.resource, a.subresource, a.name, a.namespace, a.path, got, tc.want)
		}
	}

	cliUserMarksDelivered(t, env)
	rolesMatchTheTable(t, env, workers)
}

// cliUserMarksDelivered: a kubectl shelljob user, who may edit the
// namespace (the chart's editor ClusterRole, which the built-in edit and
// admin aggregate), may mark their job delivered and stop it with merge
// patches, as the plugin does, through RBAC and the admission policies; a
// viewer may not.
func cliUserMarksDelivered(t *testing.T, env *testenv.Env) {
	t.Helper()
	ctx := context.Background()
	c := env.Client
	// The roles the built-in edit and view aggregate (envtest runs no
	// aggregation controller).
	for name, b := range map[string][2]string{
		"carol-jobs": {"carol", "shelljob-editor"}, "carol-pools": {"carol", "shellpool-editor"}, "victor": {"victor", "shelljob-viewer"},
	} {
		user, role := b[0], b[1]
		if err := c.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: release + "-" + namespace + "-" + role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
		}); err != nil {
			t.Fatal(err)
		}
	}
	authenticated := []string{"system:authenticated"}
	patchJobs := access{verb: "patch", group: "shell.shelljob.dev", resource: "shelljobs", namespace: namespace}
	// RBAC's authorizer sees the bindings above once its informer has:
	// under a loaded machine, a moment after their create.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return allowedAs(t, c, "carol", authenticated, patchJobs), nil
	}); err != nil {
		t.Error("an editor may not patch shelljobs")
	}
	if allowedAs(t, c, "victor", authenticated, patchJobs) {
		t.Error("a viewer may patch shelljobs")
	}

	asUser := func(user string) client.Client {
		cfg := rest.CopyConfig(env.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: authenticated}
		cl, err := client.New(cfg, client.Options{Scheme: env.Scheme})
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	carol := asUser("carol")
	job := &shellv1alpha1.ShellJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, GenerateName: "cli-"},
		Spec: shellv1alpha1.ShellJobSpec{
			Command: "echo hi", Mode: shellv1alpha1.ModeFork, Pool: "shell",
			Origin: shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginCLI, User: "carol"},
		},
	}
	if err := carol.Create(ctx, job); err != nil {
		t.Fatalf("carol's ShellJob: %v", err)
	}
	mark := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+shellv1alpha1.AnnotationDelivered+`":"2026-12-02T17:00:00Z"}}}`))
	if err := carol.Patch(ctx, job.DeepCopy(), mark); err != nil {
		t.Errorf("carol's delivered mark: %v", err)
	}
	stop := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"stop":true,"stopReason":"User"}}`))
	if err := carol.Patch(ctx, job.DeepCopy(), stop); err != nil {
		t.Errorf("carol's stop: %v", err)
	}
	if err := asUser("victor").Patch(ctx, job.DeepCopy(), mark); err == nil {
		t.Error("victor, a viewer, marked carol's job delivered")
	}
	var got shellv1alpha1.ShellJob
	if err := c.Get(ctx, client.ObjectKeyFromObject(job), &got); err != nil {
		t.Fatal(err)
	}
	if got.Annotations[shellv1alpha1.AnnotationDelivered] != "2026-12-02T17:00:00Z" || !got.Spec.Stop {
		t.Errorf("carol's job: annotations %v, stop %v", got.Annotations, got.Spec.Stop)
	}
}
