package kube_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	streamv1alpha1 "shelljob.dev/shelljob/api/stream/v1alpha1"
	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/charttest"
	"shelljob.dev/shelljob/internal/identity"
)

// readManifest decodes a file of config/bot into obj.
func readManifest(t *testing.T, name string, obj any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "bot", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096).Decode(obj); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// botConfig applies config/bot's ServiceAccount, Roles and RoleBindings in
// ns, and its impersonation ClusterRole and binding, and returns a client
// config and a client that act as that ServiceAccount, with a token the
// API server issued for it.
func botConfig(t *testing.T, ns string) (*rest.Config, client.Client) {
	t.Helper()
	ctx := context.Background()
	var sa corev1.ServiceAccount
	var role, telegramRole rbacv1.Role
	var binding, telegramBinding rbacv1.RoleBinding
	var impersonate rbacv1.ClusterRole
	var impersonateBinding rbacv1.ClusterRoleBinding
	readManifest(t, "service_account.yaml", &sa)
	readManifest(t, "role.yaml", &role)
	readManifest(t, "role_binding.yaml", &binding)
	readManifest(t, "telegram_role.yaml", &telegramRole)
	readManifest(t, "telegram_role_binding.yaml", &telegramBinding)
	readManifest(t, "impersonate_role.yaml", &impersonate)
	readManifest(t, "impersonate_role_binding.yaml", &impersonateBinding)
	sa.Namespace, role.Namespace, binding.Namespace, telegramRole.Namespace, telegramBinding.Namespace = ns, ns, ns, ns, ns
	for i := range binding.Subjects {
		binding.Subjects[i].Namespace = ns
	}
	// Cluster-wide: named for the test's namespace.
	impersonate.Name += "-" + ns
	impersonateBinding.Name, impersonateBinding.RoleRef.Name = impersonate.Name, impersonate.Name
	impersonateBinding.Subjects[0].Namespace = ns
	for _, obj := range []client.Object{&sa, &role, &binding, &telegramRole, &telegramBinding, &impersonate, &impersonateBinding} {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatalf("apply %T: %v", obj, err)
		}
	}
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), &impersonateBinding)
		_ = env.Client.Delete(context.Background(), &impersonate)
	})
	cfg := charttest.ServiceAccount(t, env.Config, ns, sa.Name)
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme, Mapper: env.Client.RESTMapper()})
	if err != nil {
		t.Fatal(err)
	}
	return cfg, c
}

// The bot's calls work with config/bot's RBAC: as itself, and as the
// admins of its example, whom it may impersonate; what it never does is
// forbidden. (The chart's RBAC and policies: newCluster and TestAccess.)
func TestBotRole(t *testing.T) {
	ns := namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wns := namespace(t)
	cfg, bc := botConfig(t, ns)
	c := botCluster(t, cfg, ns)
	const admin1, notAdmin = 111, 333

	pool := &shellv1alpha1.ShellPool{ObjectMeta: metav1.ObjectMeta{Name: shellv1alpha1.DefaultPool, Namespace: ns}}
	if err := env.Client.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	spec := telegramSpec("sleep 5", admin1)
	spec.Hold = true
	sj, err := admin(c, admin1).Submit(ctx, "", spec, map[string]string{shellv1alpha1.AnnotationPreview: "{}"})
	if err != nil {
		t.Fatalf("submit as an admin: %v", err)
	}
	w := watchJob(ctx, c, sj.Name)
	w.waitFor(t, "the job", func(*shellv1alpha1.ShellJob) bool { return true })
	setStatus(t, ns, sj.Name, func(s *shellv1alpha1.ShellJobStatus) { s.Phase, s.Pod = shellv1alpha1.PhaseQueued, "shell-0" })
	w.waitFor(t, "the status", func(sj *shellv1alpha1.ShellJob) bool { return sj.Status.Pod == "shell-0" })
	_, _, stopErr := admin(c, admin1).Stop(ctx, sj.Name)
	_, _, offlineErr := c.Stop(ctx, sj.Name, shellv1alpha1.StopReasonShutdown)
	_, poolErr := c.Pool(ctx, shellv1alpha1.DefaultPool)
	for what, err := range map[string]error{
		"release as the admin":   admin(c, admin1).Release(ctx, sj.Name),
		"stop as the admin":      stopErr,
		"stop as the bot":        offlineErr,
		"annotate as the bot":    c.Annotate(ctx, sj.Name, shellv1alpha1.AnnotationDelivered, "now"),
		"restart as the admin":   admin(c, admin1).RestartPool(ctx, shellv1alpha1.DefaultPool),
		"read a pool as the bot": poolErr,
	} {
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}
	listWhen(t, c, func(all []shellv1alpha1.ShellJob) bool { return len(all) == 1 })
	useStores(t, bc, ns)

	// The jobs' output and files through the stream API: as the admin
	// whose job it is (myshelljobs, which the stream API serves to the
	// job's owner alone), in the bot's namespace alone, and never as the
	// bot itself; no pod anywhere, and so no exec into a worker. No server
	// serves the stream API here, so ask.
	ac, err := c.People.Client(identity.Default(admin1))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []authorizationv1.ResourceAttributes{
		{Verb: "get", Subresource: "log"}, {Verb: "get", Subresource: "files"},
		{Verb: "create", Subresource: "files"}, {Verb: "update", Subresource: "files"},
	} {
		a.Group, a.Name = streamv1alpha1.GroupName, "j"
		for _, n := range []string{ns, wns} {
			a.Namespace, a.Resource = n, streamv1alpha1.Resource
			if allowed(t, bc, a) {
				t.Errorf("%s shelljobs/%s in %s is allowed to the bot", a.Verb, a.Subresource, n)
			}
			if allowed(t, ac, a) {
				t.Errorf("%s shelljobs/%s in %s is allowed to an admin", a.Verb, a.Subresource, n)
			}
			a.Resource = streamv1alpha1.OwnResource
			if allowed(t, bc, a) {
				t.Errorf("%s myshelljobs/%s in %s is allowed to the bot", a.Verb, a.Subresource, n)
			}
			if got := allowed(t, ac, a); got != (n == ns) {
				t.Errorf("%s myshelljobs/%s in %s: allowed %v to an admin", a.Verb, a.Subresource, n, got)
			}
		}
	}
	for _, n := range []string{ns, wns} {
		for _, a := range []authorizationv1.ResourceAttributes{
			{Verb: "create", Resource: "pods", Subresource: "exec"}, {Verb: "get", Resource: "pods", Subresource: "exec"},
			{Verb: "get", Resource: "pods"}, {Verb: "list", Resource: "pods"},
			{Verb: "create", Group: streamv1alpha1.GroupName, Resource: streamv1alpha1.Resource, Subresource: "attach"},
		} {
			a.Namespace = n
			if allowed(t, bc, a) {
				t.Errorf("%s %s/%s in %s is allowed", a.Verb, a.Resource, a.Subresource, n)
			}
		}
	}

	// What the bot never does, as itself or as anyone it may not become.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "shell-0", Namespace: ns},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "shelljob/worker"}}},
	}
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: ns}}
	if err := env.Client.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	got := sj.DeepCopy()
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sj), got); err != nil {
		t.Fatal(err)
	}
	mine := &shellv1alpha1.ShellJob{ObjectMeta: metav1.ObjectMeta{Name: "mine", Namespace: ns}, Spec: telegramSpec("true", admin1)}
	_, notAdminErr := admin(c, notAdmin).Submit(ctx, "", telegramSpec("true", notAdmin), nil)
	forbidden := map[string]error{
		"create a job as itself":       bc.Create(ctx, mine),
		"restart a pool as itself":     bc.Patch(ctx, pool, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"restartedAt":"2026-01-02T03:04:05Z"}}`))),
		"act for someone not an admin": notAdminErr,
		"delete a pod":                 bc.Delete(ctx, pod),
		"list pods":                    bc.List(ctx, &corev1.PodList{}, client.InNamespace(ns)),
		"delete a job":                 bc.Delete(ctx, got),
		"update a job status":          bc.Status().Update(ctx, got),
		"read another secret":          bc.Get(ctx, types.NamespacedName{Namespace: ns, Name: "other"}, &corev1.Secret{}),
		"list secrets":                 bc.List(ctx, &corev1.SecretList{}, client.InNamespace(ns)),
		"delete the session":           bc.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: sessionName, Namespace: ns}}),
		"delete a pool":                bc.Delete(ctx, pool),
		"list jobs elsewhere":          bc.List(ctx, &shellv1alpha1.ShellJobList{}, client.InNamespace("default")),
	}
	for what, err := range forbidden {
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s = %v, want forbidden", what, err)
		}
	}
}

// allowed asks the API server whether c may do attrs.
func allowed(t *testing.T, c client.Client, attrs authorizationv1.ResourceAttributes) bool {
	t.Helper()
	r := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs}}
	if err := c.Create(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return r.Status.Allowed
}
