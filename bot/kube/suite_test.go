package kube_test

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/bot"
	"shelljob.dev/shelljob/bot/kube"
	"shelljob.dev/shelljob/internal/charttest"
	"shelljob.dev/shelljob/internal/identity"
	"shelljob.dev/shelljob/internal/testenv"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

// env is the API server every test of the package shares; no operator
// runs, so tests write the jobs' status themselves.
var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, &env)
}

// namespace makes a namespace of its own for one test.
func namespace(t *testing.T) string { return env.Namespace(t, "bot") }

// The chat admins of the tests, by Telegram id: the chart maps each to its
// default identity.
const (
	ada = 1
	bob = 2
)

// newCluster installs the chart's ServiceAccounts, RBAC and admission
// policies on ns (charttest), with the admins ada and bob, and the pool
// shell, and returns the bot's Cluster there as in production: its
// ServiceAccount's token, the admins' identities it impersonates, its
// cache started until the end of the test.
func newCluster(t *testing.T, ns string) *kube.Cluster {
	t.Helper()
	return botCluster(t, installChart(t, ns), ns)
}

// installChart installs the chart's access on ns, with the admins ada and
// bob, and the pool shell, and returns the config of the bot's
// ServiceAccount.
func installChart(t *testing.T, ns string) *rest.Config {
	t.Helper()
	if err := env.Client.Create(context.Background(), utiltesting.MakeShellPool(shellv1alpha1.DefaultPool, ns).Obj()); err != nil {
		t.Fatal(err)
	}
	in := charttest.Install(t, env.Config, env.Client, ns, map[string]any{"bot": map[string]any{"admins": []int64{ada, bob}}})
	in.WaitPolicies(t, env.Client, ada, shellv1alpha1.DefaultPool)
	return in.Bot(t)
}

// botCluster is the bot's Cluster on ns as cfg's user.
func botCluster(t *testing.T, cfg *rest.Config, ns string) *kube.Cluster {
	t.Helper()
	options := client.Options{Scheme: env.Scheme, Mapper: env.Client.RESTMapper()}
	c, err := client.New(cfg, options)
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := kube.StartCache(t.Context(), cfg, env.Scheme, ns)
	if err != nil {
		t.Fatal(err)
	}
	return &kube.Cluster{Client: c, Namespace: ns, Cache: jobs, People: kube.NewPeople(cfg, options)}
}

// admin is the cluster acting for the chat admin tg.
func admin(c *kube.Cluster, tg int64) bot.Person { return c.As(identity.Default(tg)) }

// person is someone with their own credentials, as far as RBAC and the
// admission policies can tell: envtest's admin impersonating user, with
// every right.
func person(t *testing.T, user string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:masters"}}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme, Mapper: env.Client.RESTMapper()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func isConflict(err error) bool { return apierrors.IsConflict(err) }
