// Package charttest renders the Helm chart (charts/shelljob) with helm
// template and installs it on envtest's API server, for the tests of the
// chart and of its clients.
//
// Install puts on a test's namespace what decides who may do what there:
// the chart's ServiceAccounts, its RBAC (the bot's Roles, its impersonation
// of the chat admins, the pools' rights) and its admission policies, bound
// to that namespace as the chart binds them to its release namespace. A
// client's requests then meet the chart's authentication, authorization
// and admission, as on a cluster; the operator, the pools and the workers
// stay the test's (internal/clustertest).
package charttest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/identity"
)

// Release is the release name the tests install the chart as.
const Release = "shelljob"

// MutatingAdmissionPolicies is the API version helm template must be told
// of to render the chart's MutatingAdmissionPolicies: it has no cluster to
// ask. envtest's API server serves it.
const MutatingAdmissionPolicies = "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy"

// RootDir is the repository's root, found from this file's place.
func RootDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// ChartDir is the chart's directory.
func ChartDir() string { return filepath.Join(RootDir(), "charts", "shelljob") }

// Helm is $HELM, else bin/helm. Without helm the test is skipped, except
// on CI (CI=true), where it fails: `make unit` builds it.
func Helm(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("HELM"); p != "" {
		return p
	}
	p := filepath.Join(RootDir(), "bin", "helm")
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no helm at %s and HELM is not set: run the tests with `make unit`", p)
		}
		t.Skipf("no helm at %s and HELM is not set (make unit builds it)", p)
	}
	return p
}

// Template runs helm template on the chart, as Release in namespace, with
// args (--values, --set, --api-versions).
func Template(t testing.TB, namespace string, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command(Helm(t), append([]string{"template", Release, ChartDir(), "--namespace", namespace}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("helm template %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}

// ValuesFile writes values to a file of the test's for helm's --values.
func ValuesFile(t testing.TB, values map[string]any) string {
	t.Helper()
	data, err := yaml.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Documents splits a multi-document YAML stream, dropping the documents
// that hold nothing but comments.
func Documents(t testing.TB, data []byte) [][]byte {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("split the manifests: %v", err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) > 0 {
			docs = append(docs, doc)
		}
	}
}

func stripComments(doc []byte) []byte {
	var b bytes.Buffer
	for line := range bytes.Lines(doc) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			b.Write(line)
		}
	}
	return b.Bytes()
}

// Objects parses the rendered documents.
func Objects(t testing.TB, manifests []byte) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	for _, doc := range Documents(t, manifests) {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			t.Fatalf("parse: %v\n%s", err, doc)
		}
		objs = append(objs, u)
	}
	return objs
}

// installOrder creates Namespaces first and the ShellPools last, as helm
// does.
func installOrder(kind string) int {
	switch kind {
	case "Namespace":
		return 0
	case "ShellPool":
		return 2
	}
	return 1
}

// Create creates objs on the API server in helm's order, refusing unknown
// fields. A Namespace that exists already is taken as it is.
func Create(t testing.TB, c client.Client, objs []*unstructured.Unstructured) {
	t.Helper()
	objs = slices.Clone(objs)
	slices.SortStableFunc(objs, func(a, b *unstructured.Unstructured) int {
		return installOrder(a.GetKind()) - installOrder(b.GetKind())
	})
	for _, u := range objs {
		err := c.Create(context.Background(), u, client.FieldValidation("Strict"))
		if u.GetKind() == "Namespace" && apierrors.IsAlreadyExists(err) {
			continue
		}
		if err != nil {
			t.Fatalf("create %s %s/%s: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
	}
}

// accessKinds are what Install creates of the chart: who may do what.
var accessKinds = map[string]bool{
	"Namespace":                        true,
	"ServiceAccount":                   true,
	"Role":                             true,
	"RoleBinding":                      true,
	"ClusterRole":                      true,
	"ClusterRoleBinding":               true,
	"ValidatingAdmissionPolicy":        true,
	"ValidatingAdmissionPolicyBinding": true,
	"MutatingAdmissionPolicy":          true,
	"MutatingAdmissionPolicyBinding":   true,
}

// Installed is the chart's access installed for one namespace.
type Installed struct {
	// Namespace is the release's.
	Namespace string
	// Objects are the rendered chart's objects, installed or not.
	Objects []*unstructured.Unstructured

	config *rest.Config
}

// Install renders the chart as a release in namespace, with values over
// the chart's defaults, and creates its ServiceAccounts, RBAC and admission
// policies (and its workers namespace, if missing) as the admin of config,
// until the end of the test: the cluster-scoped ones are deleted then. The
// API server takes new policies up within seconds: see the callers' waits.
func Install(t testing.TB, config *rest.Config, c client.Client, namespace string, values map[string]any) *Installed {
	t.Helper()
	manifests, err := Template(t, namespace, "--values", ValuesFile(t, values), "--api-versions", MutatingAdmissionPolicies)
	if err != nil {
		t.Fatal(err)
	}
	in := &Installed{Namespace: namespace, Objects: Objects(t, manifests), config: config}
	var access []*unstructured.Unstructured
	for _, o := range in.Objects {
		if accessKinds[o.GetKind()] {
			access = append(access, o)
		}
	}
	Create(t, c, access)
	t.Cleanup(func() {
		for _, o := range access {
			if o.GetNamespace() == "" && o.GetKind() != "Namespace" {
				_ = c.Delete(context.Background(), o)
			}
		}
	})
	return in
}

// Object is the rendered object of kind and name, nil if none.
func (in *Installed) Object(kind, name string) *unstructured.Unstructured {
	for _, o := range in.Objects {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

// ServiceAccount reaches the API server as the release's ServiceAccount
// name, with a token the API server issued for it: through the API
// server's own authentication, as a pod would.
func (in *Installed) ServiceAccount(t testing.TB, name string) *rest.Config {
	t.Helper()
	return ServiceAccount(t, in.config, in.Namespace, name)
}

// ServiceAccount reaches the API server of admin (a config that may
// request tokens) as the ServiceAccount name of namespace, with a token
// the API server issued for it.
func ServiceAccount(t testing.TB, admin *rest.Config, namespace, name string) *rest.Config {
	t.Helper()
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(context.Background(), name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a token of %s: %v", name, err)
	}
	cfg := rest.AnonymousClientConfig(admin)
	cfg.BearerToken = tr.Status.Token
	return cfg
}

// Identities is what the chart's ConfigMap tells the bot of the chat
// admins and the chats (identity.Parse).
func (in *Installed) Identities(t testing.TB) *identity.Mapping {
	t.Helper()
	cm := in.Object("ConfigMap", Release+"-bot-identities")
	if cm == nil {
		t.Fatal("the chart made no ConfigMap " + Release + "-bot-identities")
	}
	data, _, _ := unstructured.NestedString(cm.Object, "data", identity.Key)
	m, err := identity.Parse([]byte(data))
	if err != nil {
		t.Fatalf("the chart's identities: %v\n%s", err, data)
	}
	return m
}

// Bot reaches the API server as the bot's ServiceAccount.
func (in *Installed) Bot(t testing.TB) *rest.Config { return in.ServiceAccount(t, Release+"-bot") }

// policyWait bounds WaitPolicies.
const policyWait = time.Minute

// WaitPolicies waits until the API server enforces the chart's RBAC and
// admission policies on the namespace: until each dry run below, made as
// the bot acting for the chat admin tg (or as the admin of the config,
// who is no bot) on pool, which must exist, comes back as the policy
// says. Only dry runs: nothing is made, whenever the policies come in.
func (in *Installed) WaitPolicies(t testing.TB, c client.Client, tg int64, pool string) {
	t.Helper()
	id := in.Identities(t).Of(tg)
	cfg := in.Bot(t)
	cfg.Impersonate = id.Impersonation()
	admin, err := client.New(cfg, client.Options{Scheme: c.Scheme(), Mapper: c.RESTMapper()})
	if err != nil {
		t.Fatal(err)
	}
	job := func(edit func(*shellv1alpha1.ShellJob)) *shellv1alpha1.ShellJob {
		j := &shellv1alpha1.ShellJob{
			ObjectMeta: metav1.ObjectMeta{Namespace: in.Namespace, Name: "charttest-probe"},
			Spec: shellv1alpha1.ShellJobSpec{Command: "true", Pool: pool, Origin: shellv1alpha1.ShellJobOrigin{
				Source: shellv1alpha1.OriginTelegram, User: id.User, TelegramUser: tg, Chat: -1, Message: 1}},
		}
		if edit != nil {
			edit(j)
		}
		return j
	}
	create := func(cl client.Client, j *shellv1alpha1.ShellJob) func(context.Context) error {
		return func(ctx context.Context) error { return cl.Create(ctx, j, client.DryRunAll) }
	}
	probes := []struct {
		policy, want string
		do           func(context.Context) error
	}{
		{"origin", "only the shelljob bot creates jobs from Telegram", create(c, job(nil))},
		{"pool-use", "You may not run commands on pool charttest-no-pool.", create(admin, job(func(j *shellv1alpha1.ShellJob) { j.Spec.Pool = "charttest-no-pool" }))},
		{"approval", "is your own job", create(admin, job(func(j *shellv1alpha1.ShellJob) {
			j.Spec.Approval = &shellv1alpha1.ShellJobApproval{Decision: shellv1alpha1.ApprovalApproved, By: id.User}
		}))},
		{"stop", "spec.stopBy must be the user who stops the job", create(admin, job(func(j *shellv1alpha1.ShellJob) {
			j.Spec.Stop, j.Spec.StopBy = true, "charttest-someone-else"
		}))},
		{"telegram", "a chat admin may not change the metadata of a ShellPool", func(ctx context.Context) error {
			p := &shellv1alpha1.ShellPool{ObjectMeta: metav1.ObjectMeta{Namespace: in.Namespace, Name: pool}}
			return admin.Patch(ctx, p, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"charttest-probe":"x"}}}`)), client.DryRunAll)
		}},
		{"stop-by", "", func(ctx context.Context) error {
			j := job(func(j *shellv1alpha1.ShellJob) { j.Spec.Stop = true })
			if err := admin.Create(ctx, j, client.DryRunAll); err != nil {
				return err
			}
			if j.Spec.StopBy != id.User {
				return fmt.Errorf("stopBy %q, want %q", j.Spec.StopBy, id.User)
			}
			return nil
		}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), policyWait)
	defer cancel()
	for _, p := range probes {
		for {
			err := p.do(ctx)
			if p.want == "" && err == nil || p.want != "" && err != nil && strings.Contains(err.Error(), p.want) {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("the chart's %s policy is not enforced on namespace %s: %v", p.policy, in.Namespace, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}
