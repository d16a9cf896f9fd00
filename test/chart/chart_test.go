package chart_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/controllers"
	"shelljob.dev/shelljob/internal/charttest"
	"shelljob.dev/shelljob/internal/identity"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

const (
	release   = "shelljob"
	namespace = "shelljob-system"
	// chartDir and rootDir are relative to this package, where go test runs.
	rootDir  = "../.."
	chartDir = rootDir + "/charts/shelljob"
)

// valueSet is one way to install the chart: values files under testdata/
// and --set flags.
type valueSet struct {
	name  string
	files []string
	set   []string
	// workers is the workers namespace these values give.
	workers string
	// serviceAccounts is the operator's --allowed-service-accounts, ""
	// for none.
	serviceAccounts string
	bot             bool
	// egress is workers.networkPolicy.egress.
	egress string
}

var valueSets = []valueSet{
	{name: "default", workers: namespace + "-workers", bot: true, egress: "all"},
	{name: "existing-secret", files: []string{"testdata/existing-secret.values.yaml"}, workers: namespace + "-workers",
		serviceAccounts: "builder,ci.runner", bot: true, egress: "all"},
	{name: "no-bot", files: []string{"testdata/no-bot.values.yaml"}, workers: "sandboxes", egress: "none"},
	{name: "access", files: []string{"testdata/access.values.yaml"}, workers: namespace + "-workers", bot: true, egress: "all"},
}

// helmTemplate runs helm template on the chart, as release in namespace.
func helmTemplate(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	return charttest.Template(t, namespace, args...)
}

func (vs valueSet) render(t *testing.T, extra ...string) []byte {
	t.Helper()
	var args []string
	for _, f := range vs.files {
		args = append(args, "--values", f)
	}
	for _, s := range vs.set {
		args = append(args, "--set", s)
	}
	out, err := helmTemplate(t, append(args, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// decoder decodes the rendered manifests strictly: a field unknown to the
// Go types of Kubernetes or shelljob fails.
var decoder = func() runtime.Decoder {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if err := shellv1alpha1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if err := apiregistrationv1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	return serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
}()

// documents splits a multi-document YAML stream, dropping empty documents.
func documents(t *testing.T, data []byte) [][]byte { return charttest.Documents(t, data) }

// objects decodes every rendered document into its Go type.
func objects(t *testing.T, data []byte) []runtime.Object {
	t.Helper()
	var objs []runtime.Object
	for _, doc := range documents(t, data) {
		obj, _, err := decoder.Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("decode strictly: %v\n%s", err, doc)
		}
		objs = append(objs, obj)
	}
	return objs
}

func ofType[T runtime.Object](objs []runtime.Object) []T {
	var out []T
	for _, o := range objs {
		if v, ok := o.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// generated matches the lines of the certificate and key the chart makes
// at each render without a cluster to look its Secret up in.
var generated = regexp.MustCompile(`(?m)^(\s*(?:tls\.crt|tls\.key|ca\.crt|caBundle): )\S+$`)

func TestGolden(t *testing.T) {
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			got := generated.ReplaceAll(vs.render(t), []byte("${1}GENERATED"))
			path := filepath.Join("testdata", vs.name+".golden.yaml")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test ./test/chart -update writes it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("helm template differs from %s (go test ./test/chart -update rewrites it):\n%s", path, firstDiff(want, got))
			}
		})
	}
}

// firstDiff shows the first line where want and got differ, with context.
func firstDiff(want, got []byte) string {
	w, g := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
	for i := 0; i < max(len(w), len(g)); i++ {
		if i < len(w) && i < len(g) && w[i] == g[i] {
			continue
		}
		from := max(0, i-3)
		var b strings.Builder
		fmt.Fprintf(&b, "line %d:\n", i+1)
		for j := from; j < i; j++ {
			fmt.Fprintf(&b, "  %s\n", w[j])
		}
		if i < len(w) {
			fmt.Fprintf(&b, "- %s\n", w[i])
		}
		if i < len(g) {
			fmt.Fprintf(&b, "+ %s\n", g[i])
		}
		return b.String()
	}
	return ""
}

// TestPodSecurity: every pod the chart makes meets the restricted profile.
func TestPodSecurity(t *testing.T) {
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			deploys := ofType[*appsv1.Deployment](objects(t, vs.render(t)))
			if want := map[bool]int{true: 2, false: 1}[vs.bot]; len(deploys) != want {
				t.Fatalf("%d Deployments, want %d", len(deploys), want)
			}
			for _, d := range deploys {
				checkRestricted(t, d.Name, &d.Spec.Template.Spec)
			}
		})
	}
}

func checkRestricted(t *testing.T, name string, pod *corev1.PodSpec) {
	t.Helper()
	psc := pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Errorf("%s: the pod's runAsNonRoot is not true", name)
	}
	if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: the pod's seccomp profile is not RuntimeDefault", name)
	}
	if pod.HostNetwork || pod.HostPID || pod.HostIPC {
		t.Errorf("%s: shares a host namespace", name)
	}
	for _, c := range slices.Concat(pod.InitContainers, pod.Containers) {
		sc := c.SecurityContext
		if sc == nil {
			t.Errorf("%s/%s: no securityContext", name, c.Name)
			continue
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
			t.Errorf("%s/%s: capabilities %+v, want ALL dropped and none added", name, c.Name, sc.Capabilities)
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("%s/%s: privilege escalation allowed", name, c.Name)
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("%s/%s: root filesystem writable", name, c.Name)
		}
		if sc.Privileged != nil && *sc.Privileged {
			t.Errorf("%s/%s: privileged", name, c.Name)
		}
		if c.LivenessProbe == nil || c.ReadinessProbe == nil {
			t.Errorf("%s/%s: no liveness or readiness probe", name, c.Name)
		}
	}
}

// grants says whether a rule allows verb on resource (group/resource form
// for non-core groups), wildcards included.
func grants(rule rbacv1.PolicyRule, group, resource, verb string) bool {
	return (slices.Contains(rule.APIGroups, group) || slices.Contains(rule.APIGroups, "*")) &&
		(slices.Contains(rule.Resources, resource) || slices.Contains(rule.Resources, "*")) &&
		(slices.Contains(rule.Verbs, verb) || slices.Contains(rule.Verbs, "*"))
}

func roleGrants(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
	return slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool { return grants(r, group, resource, verb) })
}

// TestRBAC: exec only in the workers namespace, by the operator alone,
// and no ClusterRole that reaches pods/exec or secrets.
func TestRBAC(t *testing.T) {
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			objs := objects(t, vs.render(t))
			roles := ofType[*rbacv1.Role](objs)
			byName := map[string]*rbacv1.Role{}
			for _, r := range roles {
				byName[r.Namespace+"/"+r.Name] = r
				if roleGrants(r.Rules, "", "pods/exec", "create") && (r.Namespace != vs.workers || r.Name != "shelljob-operator") {
					t.Errorf("Role %s/%s grants pods/exec: only the operator's, in the workers namespace %s, may", r.Namespace, r.Name, vs.workers)
				}
				if r.Namespace == vs.workers && roleGrants(r.Rules, "", "secrets", "get") {
					t.Errorf("Role %s/%s grants secrets in the workers namespace", r.Namespace, r.Name)
				}
			}
			op := byName[vs.workers+"/shelljob-operator"]
			if op == nil || !roleGrants(op.Rules, "", "pods/exec", "create") || !roleGrants(op.Rules, "", "pods", "create") {
				t.Errorf("the operator's Role in %s does not grant pods and pods/exec", vs.workers)
			}
			// The bot reads output and moves files through the stream API:
			// it has no Role where the workers are.
			if bot := byName[vs.workers+"/shelljob-bot"]; bot != nil {
				t.Errorf("the bot has a Role %s/%s in the workers namespace", bot.Namespace, bot.Name)
			}
			// As itself, the bot reads jobs and pools and writes its
			// bookkeeping on jobs; it creates jobs, reads their output and
			// files and restarts pools as the chat admins it impersonates.
			r := byName[namespace+"/shelljob-bot"]
			switch {
			case !vs.bot && r != nil:
				t.Errorf("bot disabled, but its Role %s/%s is there", r.Namespace, r.Name)
			case vs.bot && (r == nil || roleGrants(r.Rules, "shell.shelljob.dev", "shellpools", "patch") ||
				roleGrants(r.Rules, "shell.shelljob.dev", "shellpools", "delete") || roleGrants(r.Rules, "shell.shelljob.dev", "shelljobs", "create") ||
				!roleGrants(r.Rules, "shell.shelljob.dev", "shelljobs", "watch") ||
				roleGrants(r.Rules, "stream.shelljob.dev", "shelljobs/log", "get") || roleGrants(r.Rules, "stream.shelljob.dev", "shelljobs/files", "get") ||
				roleGrants(r.Rules, "", "pods", "get")):
				t.Errorf("the bot's Role in %s: want shelljobs watched, and no shelljobs create, shellpools patch or delete, no job's output or files, nor pods", namespace)
			}
			if tr := byName[namespace+"/shelljob-bot-telegram"]; vs.bot && (tr == nil ||
				!roleGrants(tr.Rules, "stream.shelljob.dev", "myshelljobs/log", "get") || roleGrants(tr.Rules, "stream.shelljob.dev", "shelljobs/log", "get")) {
				t.Errorf("the chat admins' Role in %s: want their own jobs' output (myshelljobs/log), and no other's", namespace)
			}
			for _, cr := range ofType[*rbacv1.ClusterRole](objs) {
				for _, res := range []string{"pods/exec", "secrets", "pods"} {
					for _, verb := range []string{"get", "create"} {
						if roleGrants(cr.Rules, "", res, verb) {
							t.Errorf("ClusterRole %s grants %s %s", cr.Name, verb, res)
						}
					}
				}
				for _, rule := range cr.Rules {
					if slices.Contains(rule.Verbs, "*") || slices.Contains(rule.Resources, "*") || slices.Contains(rule.APIGroups, "*") {
						t.Errorf("ClusterRole %s has a wildcard rule %+v", cr.Name, rule)
					}
				}
			}
			for _, b := range ofType[*rbacv1.ClusterRoleBinding](objs) {
				switch b.RoleRef.Name {
				case "shelljob-shelljob-system-metrics-auth", "shelljob-shelljob-system-nodes", "system:auth-delegator", "shelljob-shelljob-system-bot-impersonate":
				default:
					t.Errorf("ClusterRoleBinding %s to %s: the only ones should bind the metrics auth, the nodes, the auth delegator and the bot's impersonation roles", b.Name, b.RoleRef.Name)
				}
			}
			// The bot impersonates named users, groups and Telegram ids
			// alone: an impersonate rule with no names would let it become
			// anyone.
			for _, cr := range ofType[*rbacv1.ClusterRole](objs) {
				for _, rule := range cr.Rules {
					if slices.Contains(rule.Verbs, "impersonate") && (len(rule.ResourceNames) == 0 || len(rule.Verbs) != 1 ||
						slices.ContainsFunc(rule.ResourceNames, func(n string) bool { return strings.HasPrefix(n, "system:") })) {
						t.Errorf("ClusterRole %s: impersonate rule %+v, want impersonate alone, on names, none of the system's", cr.Name, rule)
					}
				}
			}
			// The NetworkPolicy reconciler: Nodes read only, policies
			// written in the two namespaces only.
			for _, cr := range ofType[*rbacv1.ClusterRole](objs) {
				if roleGrants(cr.Rules, "", "nodes", "update") || roleGrants(cr.Rules, "", "nodes", "patch") ||
					roleGrants(cr.Rules, "networking.k8s.io", "networkpolicies", "create") {
					t.Errorf("ClusterRole %s writes nodes or NetworkPolicies", cr.Name)
				}
			}
			for _, want := range []string{namespace + "/shelljob-operator", vs.workers + "/shelljob-operator"} {
				if r := byName[want]; r == nil || !roleGrants(r.Rules, "networking.k8s.io", "networkpolicies", "update") {
					t.Errorf("Role %s does not let the operator write its NetworkPolicy", want)
				}
			}
		})
	}
}

func deployment(t *testing.T, objs []runtime.Object, name string) *appsv1.Deployment {
	t.Helper()
	for _, d := range ofType[*appsv1.Deployment](objs) {
		if d.Name == name {
			return d
		}
	}
	t.Fatalf("no Deployment %s", name)
	return nil
}

// TestOperator: the operator's flags, its own ServiceAccount and its grace
// period.
func TestOperator(t *testing.T) {
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			d := deployment(t, objects(t, vs.render(t)), "shelljob-operator")
			c := d.Spec.Template.Spec.Containers[0]
			args := c.Args
			for _, want := range []string{"--namespace=" + namespace, "--worker-namespace=" + vs.workers, "--leader-elect", "--health-probe-bind-address=:8081",
				"--workers-network-policy=shelljob-workers", "--workers-egress=" + vs.egress, "--release-network-policy=shelljob-deny-workers"} {
				if !slices.Contains(args, want) {
					t.Errorf("args %q lack %s", args, want)
				}
			}
			i := slices.IndexFunc(args, func(a string) bool { return strings.HasPrefix(a, "--allowed-service-accounts=") })
			switch {
			case vs.serviceAccounts == "" && i >= 0:
				t.Errorf("args %q allow ServiceAccounts, want none allowed", args)
			case vs.serviceAccounts != "" && (i < 0 || args[i] != "--allowed-service-accounts="+vs.serviceAccounts):
				t.Errorf("args %q, want --allowed-service-accounts=%s", args, vs.serviceAccounts)
			}
			// The operator knows its own ServiceAccount, so that no pool gets it.
			if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
				return e.Name == "POD_SERVICE_ACCOUNT" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil &&
					e.ValueFrom.FieldRef.FieldPath == "spec.serviceAccountName"
			}) {
				t.Errorf("env %+v lacks POD_SERVICE_ACCOUNT from spec.serviceAccountName", c.Env)
			}
			// The kubelet's SIGKILL must not come before the manager's
			// graceful shutdown ends, which outlasts the longest exec.
			shutdown := int64(controllers.GracefulShutdownTimeout / time.Second)
			if g := d.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || *g <= shutdown {
				t.Errorf("terminationGracePeriodSeconds %v, want above the operator's GracefulShutdownTimeout, %d s", ptr.Deref(g, 0), shutdown)
			}
		})
	}
}

// TestBot: the bot from an existing Secret, pointed at a fake Telegram.
func TestBot(t *testing.T) {
	objs := objects(t, valueSets[1].render(t))
	d := deployment(t, objs, "shelljob-bot")
	if *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("replicas %d, strategy %s: want one replica, Recreate", *d.Spec.Replicas, d.Spec.Strategy.Type)
	}
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	for _, want := range []string{"-namespace=" + namespace, "-dc=1",
		"-dc-addr=shelljob-faketg.shelljob-system.svc:8443", "-public-key=/etc/shelljob/telegram/public.pem", "-v=2",
		"-files-out-file=50Mi", "-files-out-job=200Mi", "-files-out-count=100"} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("args %q lack %s", c.Args, want)
		}
	}
	// The bot reaches no worker: the stream API serves it.
	if slices.ContainsFunc(c.Args, func(a string) bool { return strings.Contains(a, namespace+"-workers") }) {
		t.Errorf("args %q name the workers' namespace", c.Args)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	for name, want := range map[string]string{
		"SHELLJOB_ADMINS":         "1000001,2000002,5123456789",
		"SHELLJOB_STREAMING":      "off",
		"SHELLJOB_BOT_TOKEN_FILE": "/etc/shelljob/bot/token",
		"SHELLJOB_APP_ID_FILE":    "/etc/shelljob/bot/appId",
		"SHELLJOB_APP_HASH_FILE":  "/etc/shelljob/bot/appHash",
	} {
		if env[name] != want {
			t.Errorf("env %s=%q, want %q", name, env[name], want)
		}
	}
	// -identities names the key of the identities ConfigMap where it is
	// mounted.
	var idFile string
	for _, a := range c.Args {
		if f, ok := strings.CutPrefix(a, "-identities="); ok {
			idFile = f
		}
	}
	mounted := false
	for _, m := range c.VolumeMounts {
		i := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
		if i >= 0 && pod.Volumes[i].ConfigMap != nil && pod.Volumes[i].ConfigMap.Name == "shelljob-bot-identities" &&
			idFile == path.Join(m.MountPath, identity.Key) {
			mounted = true
		}
	}
	if !mounted {
		t.Errorf("-identities=%q is not the key %s of the ConfigMap shelljob-bot-identities where it is mounted (%+v)", idFile, identity.Key, c.VolumeMounts)
	}
	if i := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Secret != nil }); i < 0 || pod.Volumes[i].Secret.SecretName != "telegram-credentials" {
		t.Errorf("no volume of the Secret telegram-credentials in %+v", pod.Volumes)
	}
	for _, s := range botSecrets(objs) {
		t.Errorf("Secret %s made, though bot.existingSecret is set", s.Name)
	}
}

// botSecrets are the Secrets the chart makes for the bot: all but the
// stream API's certificate.
func botSecrets(objs []runtime.Object) []*corev1.Secret {
	return slices.DeleteFunc(ofType[*corev1.Secret](objs), func(s *corev1.Secret) bool {
		return s.Name == "shelljob-operator-stream-api-tls"
	})
}

// TestBotSecretFromValues: the chart makes the Secret from values, and the
// app id stays an integer however the values spell it.
func TestBotSecretFromValues(t *testing.T) {
	out := valueSets[0].render(t, "--set", "bot.token=123:abc", "--set", "bot.appId=17349", "--set", "bot.appHash=f00d")
	objs := objects(t, out)
	secrets := botSecrets(objs)
	if len(secrets) != 1 {
		t.Fatalf("%d Secrets, want 1", len(secrets))
	}
	want := map[string]string{"token": "123:abc", "appId": "17349", "appHash": "f00d"}
	for k, v := range want {
		if got := secrets[0].StringData[k]; got != v {
			t.Errorf("Secret key %s=%q, want %q", k, got, v)
		}
	}
	pod := deployment(t, objs, "shelljob-bot").Spec.Template.Spec
	if i := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Secret != nil }); i < 0 || pod.Volumes[i].Secret.SecretName != secrets[0].Name {
		t.Errorf("the bot does not mount the Secret %s", secrets[0].Name)
	}
}

// TestPools: the default pools, and a pool's resources merged over the
// workers' defaults.
func TestPools(t *testing.T) {
	pools := ofType[*shellv1alpha1.ShellPool](objects(t, valueSets[0].render(t)))
	got := map[string]int32{}
	for _, p := range pools {
		got[p.Name] = p.Spec.Replicas
		if p.Namespace != namespace {
			t.Errorf("pool %s in %s, want %s", p.Name, p.Namespace, namespace)
		}
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage} {
			if _, ok := p.Spec.Resources.Limits[r]; !ok {
				t.Errorf("pool %s: no %s limit", p.Name, r)
			}
			if _, ok := p.Spec.Resources.Requests[r]; !ok {
				t.Errorf("pool %s: no %s request", p.Name, r)
			}
		}
	}
	if want := map[string]int32{"shell": 16, "plugin": 4}; !equalMaps(got, want) {
		t.Errorf("pools %v, want %v", got, want)
	}

	pools = ofType[*shellv1alpha1.ShellPool](objects(t, valueSets[1].render(t)))
	if len(pools) != 1 || pools[0].Name != "build" {
		t.Fatalf("pools %v, want only build", pools)
	}
	res := pools[0].Spec.Resources
	if cpu, mem := res.Limits.Cpu().String(), res.Limits.Memory().String(); cpu != "4" || mem != "1Gi" {
		t.Errorf("build's limits: cpu %s, memory %s; want 4 (its own) and 1Gi (the default)", cpu, mem)
	}
}

// TestSpoolSizeLimit: the pools get workers.spoolSizeLimit when, and only
// when, the ShellPool CRD has the field.
func TestSpoolSizeLimit(t *testing.T) {
	crd, err := os.ReadFile(filepath.Join(chartDir, "crds", "shell.shelljob.dev_shellpools.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	inAPI := bytes.Contains(crd, []byte("spoolSizeLimit:"))
	for _, doc := range documents(t, valueSets[0].render(t)) {
		var obj struct {
			Kind string
			Spec map[string]any
		}
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatal(err)
		}
		if obj.Kind != "ShellPool" {
			continue
		}
		got, set := obj.Spec["spoolSizeLimit"]
		switch {
		case inAPI && got != "1Gi":
			t.Errorf("spoolSizeLimit %v, want 1Gi", got)
		case !inAPI && set:
			t.Errorf("spoolSizeLimit %v set, but the ShellPool CRD has no such field", got)
		}
	}
}

func equalMaps[K comparable, V comparable](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestSchema: values.schema.json refuses a typo'd key and wrong types.
func TestSchema(t *testing.T) {
	for _, set := range []string{
		"typo=1",
		"bot.tokn=x",
		"bot.enabled=maybe",
		"bot.admins={alice}",
		"pools.shell.replicas=many",
		"pools.shell.replica=2",
		"workers.networkPolicy.egress=some",
		"workers.networkPolicy.podCIDRs={10.244.0.0}",
		"workers.networkPolicy.deniedCIDRs={metadata}",
		"images.bot.pullPolicy=Sometimes",
		"operator.terminationGracePeriodSeconds=10",
		"workers.allowedServiceAccounts={Robot_1}",
		"pools.shell.serviceAccountName=kube-system/default",
		"bot.files.outCount=0",
		"bot.files.outFiles=1",
		"jobQuota.shellJobs=0",
		"jobQuota.shellJobs=lots",
		"jobQuota.shelljobs=5",
		"bot.poolVerbs={run}",
		"bot.identities[0].telegramUser=1",
		"bot.identities[0].user=alice",
		"bot.chats[0].chat=-1",
		"bot.chats[0].pool=Dev",
		"pools.shell.maxRunningPerUser=0",
		"pools.shell.users=carol",
		"pools.shell.stop.user={carol}",
		"pools.shell.approval.timeoutSeconds=0",
	} {
		t.Run(set, func(t *testing.T) {
			_, err := helmTemplate(t, "--set", set)
			if err == nil || !strings.Contains(err.Error(), "values don't meet the specifications of the schema") {
				t.Errorf("helm template --set %s: %v, want a schema error", set, err)
			}
		})
	}
}

// TestCRDsInSync: the chart's CRDs are the ones make manifests generates.
func TestCRDsInSync(t *testing.T) {
	gen, err := filepath.Glob(filepath.Join(rootDir, "config", "crd", "bases", "*.yaml"))
	if err != nil || len(gen) == 0 {
		t.Fatalf("no generated CRDs: %v", err)
	}
	inChart, err := filepath.Glob(filepath.Join(chartDir, "crds", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	names := func(paths []string) []string {
		var out []string
		for _, p := range paths {
			out = append(out, filepath.Base(p))
		}
		return out
	}
	if !slices.Equal(names(gen), names(inChart)) {
		t.Fatalf("charts/shelljob/crds holds %v, config/crd/bases %v: run make manifests", names(inChart), names(gen))
	}
	for _, p := range gen {
		want, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(chartDir, "crds", filepath.Base(p)))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("charts/shelljob/crds/%s differs from config/crd/bases: run make manifests", filepath.Base(p))
		}
	}
}

// TestCRDNames: the CRDs share a category, and it names no resource of
// theirs, or `kubectl get shelljob NAME` would look NAME up in every kind
// of the category.
func TestCRDNames(t *testing.T) {
	const category = "shelljob-all"
	paths, err := filepath.Glob(filepath.Join(rootDir, "config", "crd", "bases", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no generated CRDs: %v", err)
	}
	type names struct {
		Kind       string   `json:"kind"`
		Plural     string   `json:"plural"`
		Singular   string   `json:"singular"`
		ShortNames []string `json:"shortNames"`
		Categories []string `json:"categories"`
	}
	var all []names
	resources := map[string]bool{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var crd struct {
			Spec struct {
				Names names `json:"names"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(data, &crd); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		n := crd.Spec.Names
		all = append(all, n)
		for _, r := range append([]string{strings.ToLower(n.Kind), n.Plural, n.Singular}, n.ShortNames...) {
			resources[r] = true
		}
	}
	for _, n := range all {
		if !slices.Contains(n.Categories, category) {
			t.Errorf("%s: categories %q, want %q among them", n.Kind, n.Categories, category)
		}
		for _, c := range n.Categories {
			if resources[c] {
				t.Errorf("%s: category %q is also a resource name", n.Kind, c)
			}
		}
	}
}

// TestMutatingPolicies: the chart fills in the user of a CLI job, and who
// stopped a job, through MutatingAdmissionPolicies where the cluster
// serves them, bound to the release's namespace, and renders none where it
// does not.
func TestMutatingPolicies(t *testing.T) {
	objs := objects(t, valueSets[0].render(t, "--api-versions", mutatingAdmissionPolicies))
	policies := ofType[*admissionregistrationv1.MutatingAdmissionPolicy](objs)
	bindings := map[string]*admissionregistrationv1.MutatingAdmissionPolicyBinding{}
	for _, b := range ofType[*admissionregistrationv1.MutatingAdmissionPolicyBinding](objs) {
		bindings[b.Spec.PolicyName] = b
	}
	var names []string
	for _, p := range policies {
		names = append(names, p.Name)
		if len(p.Spec.Mutations) != 1 || p.Spec.Mutations[0].JSONPatch == nil ||
			!strings.Contains(p.Spec.Mutations[0].JSONPatch.Expression, "request.userInfo.username") {
			t.Errorf("%s: mutations %+v", p.Name, p.Spec.Mutations)
		}
		b := bindings[p.Name]
		if b == nil || b.Spec.MatchResources == nil || b.Spec.MatchResources.NamespaceSelector == nil ||
			b.Spec.MatchResources.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != namespace {
			t.Errorf("%s: binding %+v", p.Name, b)
		}
	}
	slices.Sort(names)
	if want := []string{"shelljob-shelljob-system-origin-user", "shelljob-shelljob-system-stop-by"}; !slices.Equal(names, want) {
		t.Errorf("policies %q, want %q", names, want)
	}
	if n := len(ofType[*admissionregistrationv1.MutatingAdmissionPolicy](objects(t, valueSets[0].render(t)))); n != 0 {
		t.Errorf("%d policies on a cluster without the API", n)
	}
}

// TestIdentityRefusals: the chart refuses identities the bot must not be
// allowed to become, and mappings the bot could not read.
func TestIdentityRefusals(t *testing.T) {
	for name, tc := range map[string]struct {
		set  []string
		want string
	}{
		"an identity of no admin": {
			set:  []string{"bot.admins={1}", "bot.identities[0].telegramUser=2", "bot.identities[0].user=alice"},
			want: "bot.identities[0]: Telegram user 2 is not in bot.admins"},
		"an admin twice": {
			set: []string{"bot.admins={1}", "bot.identities[0].telegramUser=1", "bot.identities[0].user=alice",
				"bot.identities[1].telegramUser=1", "bot.identities[1].user=bob"},
			want: "bot.identities[1]: Telegram user 1 is listed twice"},
		"a system user": {
			set:  []string{"bot.admins={1}", "bot.identities[0].telegramUser=1", "bot.identities[0].user=system:admin"},
			want: "user system:admin: a chat admin may not be a system: user"},
		"a ServiceAccount": {
			set:  []string{"bot.admins={1}", "bot.identities[0].telegramUser=1", "bot.identities[0].user=system:serviceaccount:kube-system:default"},
			want: "a chat admin may not be a system: user"},
		"another admin's default identity": {
			set:  []string{"bot.admins={1,2}", "bot.identities[0].telegramUser=1", "bot.identities[0].user=shelljob:telegram:2"},
			want: "user shelljob:telegram:2 is another Telegram user's default identity"},
		"system:masters": {
			set:  []string{"bot.admins={1}", "bot.identities[0].telegramUser=1", "bot.identities[0].user=alice", "bot.identities[0].groups={system:masters}"},
			want: "group system:masters: a chat admin may not be in a system: group"},
		"a chat twice": {
			set:  []string{"bot.chats[0].chat=-5", "bot.chats[0].pool=a", "bot.chats[1].chat=-5", "bot.chats[1].pool=b"},
			want: "bot.chats[1]: chat -5 is zero or listed twice"},
	} {
		t.Run(name, func(t *testing.T) {
			var args []string
			for _, s := range tc.set {
				args = append(args, "--set", s)
			}
			_, err := helmTemplate(t, args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("helm template: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestIdentities: the bot reads the chart's mapping (internal/identity),
// and may impersonate exactly the identities it gives the admins: every
// admin's user, group and Telegram id, and nothing else.
func TestIdentities(t *testing.T) {
	objs := objects(t, valueSets[3].render(t))
	var mapping *identity.Mapping
	for _, cm := range ofType[*corev1.ConfigMap](objs) {
		if cm.Name == "shelljob-bot-identities" {
			m, err := identity.Parse([]byte(cm.Data[identity.Key]))
			if err != nil {
				t.Fatalf("the bot cannot read the chart's identities: %v\n%s", err, cm.Data[identity.Key])
			}
			mapping = m
		}
	}
	if mapping == nil {
		t.Fatal("no ConfigMap shelljob-bot-identities")
	}
	if pool, ok := mapping.PoolOf(-1001234567890); !ok || pool != "dev" {
		t.Errorf("the dev team's chat runs on %q, %v; want dev", pool, ok)
	}
	var users, groups, ids []string
	for _, admin := range []int64{111, 222, 333} {
		id := mapping.Of(admin)
		users = append(users, id.User)
		groups = append(groups, id.Groups...)
		ids = append(ids, strconv.FormatInt(admin, 10))
	}
	want := map[string][]string{"users": sortedSet(users), "groups": sortedSet(groups),
		"userextras/shelljob.dev/telegram-user": sortedSet(ids)}
	got := map[string][]string{}
	for _, cr := range ofType[*rbacv1.ClusterRole](objs) {
		for _, rule := range cr.Rules {
			if slices.Contains(rule.Verbs, "impersonate") {
				for _, r := range rule.Resources {
					got[r] = append(got[r], rule.ResourceNames...)
				}
			}
		}
	}
	if len(got) != len(want) {
		t.Errorf("the bot impersonates %v, want %v", got, want)
	}
	for r, names := range want {
		if !slices.Equal(sortedSet(got[r]), names) {
			t.Errorf("the bot impersonates %s %q, want %q", r, got[r], names)
		}
	}
	d := deployment(t, objs, "shelljob-bot")
	if !slices.ContainsFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
		return v.ConfigMap != nil && v.ConfigMap.Name == "shelljob-bot-identities"
	}) {
		t.Error("the bot does not mount its identities")
	}
}

func sortedSet(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}
