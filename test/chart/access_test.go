package chart_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/charttest"
	"shelljob.dev/shelljob/internal/identity"
	"shelljob.dev/shelljob/internal/shelljob"
	"shelljob.dev/shelljob/internal/testenv"
)

const mutatingAdmissionPolicies = charttest.MutatingAdmissionPolicies

// accessEnv is the chart of testdata/access.values.yaml on envtest's API
// server, and its people: each client goes through the API server's real
// authentication (a client certificate, a ServiceAccount token),
// impersonation filter, authorizer (RBAC) and admission chain. Nothing
// stands in for a policy.
type accessEnv struct {
	t   *testing.T
	env *testenv.Env
	// admin is envtest's admin (system:masters).
	admin client.Client
	// botConfig reaches the API server with the bot ServiceAccount's token.
	botConfig *rest.Config
	// mapping is what the chart's ConfigMap tells the bot.
	mapping *identity.Mapping
}

// newAccessEnv installs the chart with the access values, and the roles a
// cluster's admin gives people outside it: a Role that lets the group
// cli-users create and change ShellJobs with no right on any pool, and
// victor the chart's editor ClusterRoles, which the built-in edit and admin
// aggregate (envtest runs no aggregation controller).
func newAccessEnv(t *testing.T) *accessEnv {
	env := startAPIServer(t)
	ctx := context.Background()
	c := env.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		t.Fatal(err)
	}
	vs := valueSet{files: []string{"testdata/access.values.yaml"}}
	objs := install(t, c, vs.render(t, "--api-versions", mutatingAdmissionPolicies))
	a := &accessEnv{t: t, env: env, admin: c}
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" && o.GetName() == "shelljob-bot-identities" {
			data, _, _ := unstructuredString(o.Object, "data", identity.Key)
			m, err := identity.Parse([]byte(data))
			if err != nil {
				t.Fatalf("the chart's identities: %v\n%s", err, data)
			}
			a.mapping = m
		}
	}
	if a.mapping == nil {
		t.Fatal("the chart made no ConfigMap shelljob-bot-identities")
	}
	for _, o := range []client.Object{
		&rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "cli"},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{shellv1alpha1.GroupVersion.Group}, Resources: []string{"shelljobs"}, Verbs: []string{"create", "get", "list", "watch", "patch"}},
				{APIGroups: []string{shellv1alpha1.GroupVersion.Group}, Resources: []string{"shellpools"}, Verbs: []string{"get", "list", "watch", "patch"}},
			},
		},
		&rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "cli"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "cli"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "cli-users"}},
		},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	for _, role := range []string{"shelljob-editor", "shellpool-editor"} {
		if err := c.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "victor-" + role},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: release + "-" + namespace + "-" + role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "victor"}},
		}); err != nil {
			t.Fatal(err)
		}
	}
	a.botConfig = a.tokenConfig("shelljob-bot")
	return a
}

func unstructuredString(obj map[string]any, path ...string) (string, bool, error) {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return "", false, nil
		}
		cur = m[p]
	}
	s, ok := cur.(string)
	return s, ok, nil
}

// tokenConfig reaches the API server as a ServiceAccount of the release
// namespace, with a token the API server issued for it.
func (a *accessEnv) tokenConfig(sa string) *rest.Config {
	a.t.Helper()
	cs, err := kubernetes.NewForConfig(a.env.Config)
	if err != nil {
		a.t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(context.Background(), sa,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		a.t.Fatalf("a token of %s: %v", sa, err)
	}
	cfg := rest.AnonymousClientConfig(a.env.Config)
	cfg.BearerToken = tr.Status.Token
	return cfg
}

func (a *accessEnv) client(cfg *rest.Config) client.Client {
	a.t.Helper()
	// The admin's mapper: a client refused its impersonation could not
	// discover the API, and would never send the request under test.
	c, err := client.New(cfg, client.Options{Scheme: a.env.Scheme, Mapper: a.admin.RESTMapper()})
	if err != nil {
		a.t.Fatal(err)
	}
	return c
}

// as is the admin impersonating user of groups: a person with their own
// credentials, as far as authorization and admission can tell.
func (a *accessEnv) as(user string, groups ...string) client.Client {
	cfg := rest.CopyConfig(a.env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append(groups, "system:authenticated")}
	return a.client(cfg)
}

// bot is the bot's ServiceAccount as itself.
func (a *accessEnv) bot() client.Client { return a.client(a.botConfig) }

// botAs is the bot's ServiceAccount impersonating imp.
func (a *accessEnv) botAs(imp rest.ImpersonationConfig) client.Client {
	cfg := rest.CopyConfig(a.botConfig)
	cfg.Impersonate = imp
	return a.client(cfg)
}

// botFor is the bot acting for a Telegram admin, as the chart maps them.
func (a *accessEnv) botFor(tg int64) client.Client { return a.botAs(a.mapping.Of(tg).Impersonation()) }

// telegramJob is the job the bot makes for a command of Telegram user tg
// in chat, as the identity the chart maps them to.
func (a *accessEnv) telegramJob(name, pool string, tg int64) *shellv1alpha1.ShellJob {
	return job(name, pool, shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginTelegram,
		User: a.mapping.Of(tg).User, TelegramUser: tg, Chat: -1001234567890, Message: 7})
}

func job(name, pool string, origin shellv1alpha1.ShellJobOrigin) *shellv1alpha1.ShellJob {
	return &shellv1alpha1.ShellJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       shellv1alpha1.ShellJobSpec{Command: "uptime", Pool: pool, Origin: origin},
	}
}

func cliJob(name, pool, user string) *shellv1alpha1.ShellJob {
	return job(name, pool, shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginCLI, User: user})
}

// check is one request and what must come of it: want "" admits it, else
// the API server refuses it as Forbidden (or Invalid, for a CRD rule),
// with want in its message.
type check struct {
	name string
	do   func(context.Context) error
	want string
}

func (a *accessEnv) run(t *testing.T, checks []check) {
	t.Helper()
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			err := c.do(context.Background())
			switch {
			case c.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case c.want == "":
			case err == nil:
				t.Errorf("admitted, want refused with %q", c.want)
			case !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err):
				t.Errorf("%v: not Forbidden, want refused with %q", err, c.want)
			case !strings.Contains(err.Error(), c.want):
				t.Errorf("refused with %v, want %q", err, c.want)
			default:
				t.Logf("refused: %v", err)
			}
		})
	}
}

// eventually runs each check until it comes out as it must: the API server
// loads new admission policies within seconds of their creation. Only
// refusals of dry runs go here, which change nothing when admitted early.
func (a *accessEnv) eventually(checks []check) {
	a.t.Helper()
	for _, c := range checks {
		deadline := time.Now().Add(30 * time.Second)
		for {
			err := c.do(context.Background())
			if err != nil && strings.Contains(err.Error(), c.want) {
				break
			}
			if time.Now().After(deadline) {
				a.t.Fatalf("%s: %v, want refused with %q once the policies are loaded", c.name, err, c.want)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

func create(c client.Client, j *shellv1alpha1.ShellJob, opts ...client.CreateOption) func(context.Context) error {
	return func(ctx context.Context) error { return c.Create(ctx, j.DeepCopy(), opts...) }
}

// patch merge-patches obj, a ShellJob or a ShellPool, by its name.
func patch(c client.Client, obj client.Object, body string, opts ...client.PatchOption) func(context.Context) error {
	return func(ctx context.Context) error {
		target := obj.DeepCopyObject().(client.Object)
		return c.Patch(ctx, target, client.RawPatch(types.MergePatchType, []byte(body)), opts...)
	}
}

var dry = client.DryRunAll

// TestAccess proves, on a real API server with the chart installed, who
// may do what: the pools' use, stop, restart and approve rights, the
// origins that only the bot acting for a chat admin can claim, the
// identities the bot may become, and what the bot writes as itself.
func TestAccess(t *testing.T) {
	a := newAccessEnv(t)
	ctx := context.Background()
	const alice, bob, dave = 111, 222, 333
	carol, erin, mallory := a.as("carol", "cli-users"), a.as("erin", "cli-users"), a.as("mallory", "cli-users")
	// alice with her own kubeconfig, named as the chart maps her.
	aliceCLI := a.as("alice", "cli-users", "dev-team")
	victor := a.as("victor")
	bot := a.bot()
	uninstall := a.as("system:serviceaccount:"+namespace+":shelljob-uninstall",
		"system:serviceaccounts", "system:serviceaccounts:"+namespace)

	carolsJob := cliJob("carol-1", "dev", "carol")
	if err := carol.Create(ctx, carolsJob.DeepCopy()); err != nil {
		t.Fatalf("carol's job on dev: %v", err)
	}
	bobsJobs := []*shellv1alpha1.ShellJob{a.telegramJob("bob-prod-1", "prod", bob), a.telegramJob("bob-prod-2", "prod", bob)}
	for _, j := range bobsJobs {
		if err := a.botFor(bob).Create(ctx, j.DeepCopy()); err != nil {
			t.Fatalf("bob's job on prod: %v", err)
		}
	}
	dev := &shellv1alpha1.ShellPool{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "dev"}}
	shell := &shellv1alpha1.ShellPool{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "shell"}}
	prod := &shellv1alpha1.ShellPool{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "prod"}}
	const stopByUser = `{"spec":{"stop":true,"stopReason":"User"}}`
	// A settled job is out of the operator's sight (shelljob.Settles).
	const settle = `{"metadata":{"labels":{"` + shellv1alpha1.LabelExpires + `":"4102444800","` + shellv1alpha1.LabelNumber + `":"1"}}}`

	a.eventually([]check{
		{"pool-use", create(mallory, cliJob("m", "dev", "mallory"), dry), "You may not run commands on pool dev."},
		{"origin", create(aliceCLI, a.telegramJob("a", "dev", alice), dry), "only the shelljob bot creates jobs from Telegram"},
		{"stop", patch(mallory, carolsJob, stopByUser, dry), "carol's job"},
		{"approval", patch(mallory, bobsJobs[0], `{"spec":{"approval":{"decision":"Approved","by":"mallory"}}}`, dry), "You may not approve"},
		{"pool-restart", patch(mallory, dev, `{"spec":{"restartedAt":"2026-01-02T03:04:05Z"}}`, dry), "You may not restart pool dev."},
		{"bot-self", patch(bot, carolsJob, `{"metadata":{"labels":{"a":"b"}}}`, dry), "the shelljob bot changes only its own annotations"},
		{"telegram", patch(a.botFor(bob), dev, `{"spec":{"replicas":2}}`, dry), "a chat admin may change only spec.restartedAt"},
		{"settled", patch(carol, carolsJob, settle, dry), "only the shelljob operator sets"},
	})
	// The API server names the stopper, once its mutating policy is loaded.
	deadline := time.Now().Add(30 * time.Second)
	for {
		j := carolsJob.DeepCopy()
		err := carol.Patch(ctx, j, client.RawPatch(types.MergePatchType, []byte(stopByUser)), dry)
		if err == nil && j.Spec.StopBy == "carol" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("carol's stop of her job: %v, stopBy %q; want it admitted, and stopBy carol", err, j.Spec.StopBy)
		}
		time.Sleep(200 * time.Millisecond)
	}

	alicesJob := a.telegramJob("alice-1", "dev", alice)
	t.Run("use", func(t *testing.T) {
		a.run(t, []check{
			{"carol, a CLI user, on prod", create(carol, cliJob("c-prod", "prod", "carol"), dry), "You may not run commands on pool prod."},
			{"carol on dev", create(carol, cliJob("c-dev", "dev", "carol"), dry), ""},
			{"alice, from the chat, on prod", create(a.botFor(alice), a.telegramJob("a-prod", "prod", alice), dry), "You may not run commands on pool prod."},
			{"alice on dev", create(a.botFor(alice), alicesJob), ""},
			{"bob on prod", create(a.botFor(bob), a.telegramJob("b-prod", "prod", bob), dry), ""},
			{"mallory, with no right, on the default pool", create(mallory, cliJob("m-shell", "", "mallory"), dry), "You may not run commands on pool shell."},
			{"dave, a chat admin, on bot.pool", create(a.botFor(dave), a.telegramJob("d-shell", "shell", dave), dry), ""},
			{"dave on dev", create(a.botFor(dave), a.telegramJob("d-dev", "dev", dave), dry), "You may not run commands on pool dev."},
			{"victor, a namespace editor, on prod", create(victor, cliJob("v-prod", "prod", "victor"), dry), ""},
		})
	})
	t.Run("origin", func(t *testing.T) {
		aliceNoExtra := a.mapping.Of(alice).Impersonation()
		aliceNoExtra.Extra = nil
		aliceAsBob := a.mapping.Of(alice).Impersonation()
		aliceAsBob.Extra = map[string][]string{identity.ExtraTelegramUser: {"222"}}
		a.run(t, []check{
			{"alice's own kubeconfig claims her Telegram origin", create(aliceCLI, a.telegramJob("a-cli-tg", "dev", alice), dry),
				"only the shelljob bot creates jobs from Telegram"},
			{"alice's own kubeconfig, a CLI job", create(aliceCLI, cliJob("a-cli", "dev", "alice"), dry), ""},
			{"the bot as itself", create(bot, a.telegramJob("bot-tg", "shell", alice), dry), `cannot create resource "shelljobs"`},
			{"the bot as alice without her Telegram id", create(a.botAs(aliceNoExtra), a.telegramJob("a-noextra", "dev", alice), dry),
				"only the shelljob bot creates jobs from Telegram"},
			{"the bot as alice with bob's Telegram id", create(a.botAs(aliceAsBob), a.telegramJob("a-asbob", "dev", alice), dry),
				"only the shelljob bot creates jobs from Telegram"},
			{"the bot as alice, a job of bob", create(a.botFor(alice), a.telegramJob("a-forbob", "dev", bob), dry),
				"only the shelljob bot creates jobs from Telegram"},
			{"the cluster's admin, not impersonating", create(a.admin, a.telegramJob("admin-tg", "dev", alice), dry),
				"only the shelljob bot creates jobs from Telegram"},
			{"carol's job as someone else", create(carol, cliJob("c-forged", "dev", "alice"), dry), "must be the user who creates it"},
		})
	})
	t.Run("impersonation", func(t *testing.T) {
		withGroup := a.mapping.Of(alice).Impersonation()
		withGroup.Groups = append(withGroup.Groups, "system:masters")
		otherID := a.mapping.Of(alice).Impersonation()
		otherID.Extra[identity.ExtraTelegramUser] = []string{"999"}
		get := func(c client.Client) func(context.Context) error {
			return func(ctx context.Context) error {
				return c.Get(ctx, client.ObjectKeyFromObject(carolsJob), &shellv1alpha1.ShellJob{})
			}
		}
		a.run(t, []check{
			{"an unmapped user", get(a.botAs(rest.ImpersonationConfig{UserName: "mallory"})), `cannot impersonate resource "users"`},
			{"a mapped user with system:masters", get(a.botAs(withGroup)), `cannot impersonate resource "groups"`},
			{"an admin's identity with another Telegram id", get(a.botAs(otherID)), `cannot impersonate resource "userextras/shelljob.dev/telegram-user"`},
			{"the operator's ServiceAccount", get(a.botAs(rest.ImpersonationConfig{UserName: "system:serviceaccount:" + namespace + ":shelljob-operator"})),
				`cannot impersonate resource "serviceaccounts"`},
			{"a mapped identity", get(a.botFor(alice)), ""},
			{"another ServiceAccount impersonating alice", get(a.client(impersonating(a.tokenConfig("shelljob-operator"), a.mapping.Of(alice).Impersonation()))),
				"cannot impersonate"},
		})
	})
	t.Run("stop", func(t *testing.T) {
		a.run(t, []check{
			{"carol stops alice's job", patch(carol, alicesJob, stopByUser, dry), "alice-1 is alice's job; you may not stop others' jobs on pool dev"},
			{"dave, a chat admin, stops alice's job on dev", patch(a.botFor(dave), alicesJob, stopByUser, dry), "is alice's job"},
			// The stop and the bot-self policies both refuse it.
			{"the bot, as itself, for a person", patch(bot, carolsJob, stopByUser, dry), "is forbidden: ValidatingAdmissionPolicy"},
			{"the bot, as itself, going offline", patch(bot, carolsJob, `{"spec":{"stop":true,"stopReason":"Shutdown"}}`, dry), ""},
			{"the uninstall hook", patch(uninstall, carolsJob, `{"spec":{"stop":true,"stopReason":"Shutdown"}}`, dry), ""},
			{"the uninstall hook, not going offline", patch(uninstall, carolsJob, stopByUser, dry), "carol's job"},
			{"carol names another stopper", patch(carol, carolsJob, `{"spec":{"stop":true,"stopBy":"bob"}}`, dry),
				"spec.stopBy must be the user who stops the job, carol"},
			{"victor, a namespace editor", patch(victor, carolsJob, stopByUser, dry), ""},
			{"alice stops her own", patch(a.botFor(alice), alicesJob, stopByUser, dry), ""},
			{"bob, who may stop on dev, stops alice's", patch(a.botFor(bob), alicesJob, stopByUser), ""},
		})
		var got shellv1alpha1.ShellJob
		if err := a.admin.Get(ctx, client.ObjectKeyFromObject(alicesJob), &got); err != nil {
			t.Fatal(err)
		}
		if !got.Spec.Stop || got.Spec.StopBy != "bob" {
			t.Errorf("alice's job after bob's stop: stop %v, stopBy %q; want stopped by bob", got.Spec.Stop, got.Spec.StopBy)
		}
	})
	t.Run("approve", func(t *testing.T) {
		decide := func(c client.Client, j *shellv1alpha1.ShellJob, d, by string, tg int64, opts ...client.PatchOption) func(context.Context) error {
			body := fmt.Sprintf(`{"spec":{"approval":{"decision":%q,"by":%q}}}`, d, by)
			if tg != 0 {
				body = fmt.Sprintf(`{"spec":{"approval":{"decision":%q,"by":%q,"telegramUser":%d}}}`, d, by, tg)
			}
			return patch(c, j, body, opts...)
		}
		approvedAtCreate := a.telegramJob("b-preapproved", "prod", bob)
		approvedAtCreate.Spec.Approval = &shellv1alpha1.ShellJobApproval{Decision: shellv1alpha1.ApprovalApproved, By: "bob"}
		a.run(t, []check{
			{"alice approves bob's job", decide(a.botFor(alice), bobsJobs[0], "Approved", "alice", alice, dry), "You may not approve or deny jobs on pool prod."},
			{"bob approves his own", decide(a.botFor(bob), bobsJobs[0], "Approved", "bob", bob, dry), "bob-prod-1 is your own job: someone else must approve or deny it"},
			{"bob creates his job approved", create(a.botFor(bob), approvedAtCreate, dry), "is your own job"},
			{"erin approves in bob's name", decide(erin, bobsJobs[0], "Approved", "bob", 0, dry), "spec.approval.by must be the user who decides, erin"},
			{"erin claims a Telegram user", decide(erin, bobsJobs[0], "Approved", "erin", dave, dry), "spec.approval.telegramUser must be the Telegram user"},
			{"victor, a namespace editor, approves", decide(victor, bobsJobs[0], "Approved", "victor", 0, dry), ""},
			{"dave approves from the chat", decide(a.botFor(dave), bobsJobs[0], "Approved", a.mapping.Of(dave).User, dave), ""},
			{"erin denies from her terminal", decide(erin, bobsJobs[1], "Denied", "erin", 0), ""},
			{"erin changes dave's decision", decide(erin, bobsJobs[0], "Denied", "erin", 0), "approval cannot change once set"},
		})
		for i, want := range []shellv1alpha1.ShellJobApproval{
			{Decision: shellv1alpha1.ApprovalApproved, By: "shelljob:telegram:333", TelegramUser: dave},
			{Decision: shellv1alpha1.ApprovalDenied, By: "erin"},
		} {
			var got shellv1alpha1.ShellJob
			if err := a.admin.Get(ctx, client.ObjectKeyFromObject(bobsJobs[i]), &got); err != nil {
				t.Fatal(err)
			}
			if got.Spec.Approval == nil || *got.Spec.Approval != want {
				t.Errorf("%s: approval %+v, want %+v", got.Name, got.Spec.Approval, want)
			}
		}
	})
	t.Run("restart", func(t *testing.T) {
		const restart = `{"spec":{"restartedAt":"2026-01-02T03:04:05Z"}}`
		a.run(t, []check{
			{"alice restarts dev", patch(a.botFor(alice), dev, restart, dry), "You may not restart pool dev."},
			{"bob, of ops, restarts dev", patch(a.botFor(bob), dev, restart, dry), ""},
			{"alice restarts bot.pool", patch(a.botFor(alice), shell, restart, dry), ""},
			{"bob resizes dev from the chat", patch(a.botFor(bob), dev, `{"spec":{"replicas":2}}`, dry), "a chat admin may change only spec.restartedAt of a ShellPool"},
			{"bob restarts dev and labels it", patch(a.botFor(bob), dev, `{"metadata":{"labels":{"a":"b"}},`+restart[1:], dry), "a chat admin may not change the metadata of a ShellPool"},
			{"the bot restarts as itself", patch(bot, shell, restart, dry), `cannot patch resource "shellpools"`},
			{"carol restarts dev", patch(carol, dev, restart, dry), "You may not restart pool dev."},
			{"carol resizes dev", patch(carol, dev, `{"spec":{"replicas":2}}`, dry), ""},
			{"victor restarts prod", patch(victor, prod, restart, dry), ""},
		})
	})
	t.Run("settled", func(t *testing.T) {
		operator := a.as("system:serviceaccount:"+namespace+":shelljob-operator", "system:serviceaccounts", "system:serviceaccounts:"+namespace)
		settled := cliJob("c-settled", "dev", "carol")
		settled.Labels = map[string]string{shellv1alpha1.LabelExpires: "4102444800"}
		a.run(t, []check{
			{"carol labels her running job settled, to hide it from the operator", patch(carol, carolsJob, settle, dry), "only the shelljob operator sets"},
			{"carol creates a job settled", create(carol, settled, dry), "only the shelljob operator sets"},
			{"victor, a namespace editor, settles carol's job", patch(victor, carolsJob, settle, dry), "only the shelljob operator sets"},
			{"the bot settles a job", patch(bot, carolsJob, settle, dry), "is forbidden: ValidatingAdmissionPolicy"},
			{"carol labels her job otherwise", patch(carol, carolsJob, `{"metadata":{"labels":{"team":"a"}}}`, dry), ""},
			{"the operator settles a job", patch(operator, carolsJob, settle, dry), ""},
		})
	})
	t.Run("bot", func(t *testing.T) {
		a.run(t, []check{
			{"the bot marks a job delivered", patch(bot, carolsJob, `{"metadata":{"annotations":{"`+shellv1alpha1.AnnotationDelivered+`":"2026-01-02T03:04:05Z"}}}`, dry), ""},
			{"the bot records a preview", patch(bot, carolsJob, `{"metadata":{"annotations":{"`+shellv1alpha1.AnnotationPreview+`":"{}"}}}`, dry), ""},
			{"the bot annotates a job otherwise", patch(bot, carolsJob, `{"metadata":{"annotations":{"x":"y"}}}`, dry), "the shelljob bot changes only its own annotations"},
			{"the bot changes a job's TTL", patch(bot, carolsJob, `{"spec":{"ttlSecondsAfterFinished":5}}`, dry), "changes nothing else of its spec"},
			{"alice, from the chat, sets her job's TTL", patch(a.botFor(alice), alicesJob, `{"spec":{"ttlSecondsAfterFinished":5}}`, dry),
				"a chat admin may change only the stop, hold and approval of a ShellJob"},
			{"alice, from the chat, annotates her job", patch(a.botFor(alice), alicesJob, `{"metadata":{"annotations":{"x":"y"}}}`, dry),
				"a chat admin may not change the metadata of a ShellJob"},
		})
	})

	// What the chat shows of a refusal: the policy's own words.
	err := carol.Create(ctx, cliJob("c-prod-2", "prod", "carol"))
	if msg, ok := shelljob.Refusal(err); !ok || msg != "You may not run commands on pool prod." {
		t.Errorf("Refusal(%v) = %q, %v", err, msg, ok)
	}
}

// impersonating is cfg impersonating imp.
func impersonating(cfg *rest.Config, imp rest.ImpersonationConfig) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Impersonate = imp
	return cfg
}
