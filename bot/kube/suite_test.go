package kube_test

import (
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"shelljob.dev/shelljob/bot/kube"

	"shelljob.dev/shelljob/internal/testenv"
)

// env is the API server every test of the package shares; no operator
// runs, so tests write the jobs' status themselves.
var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, &env)
}

// namespace makes a namespace of its own for one test.
func namespace(t *testing.T) string { return env.Namespace(t, "bot") }

// newCluster is the bot's Cluster on ns as cfg's user, with its cache
// started until the end of the test.
func newCluster(t *testing.T, cfg *rest.Config, ns string) *kube.Cluster {
	t.Helper()
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := kube.StartCache(t.Context(), cfg, env.Scheme, ns)
	if err != nil {
		t.Fatal(err)
	}
	return &kube.Cluster{Client: c, Namespace: ns, Cache: jobs}
}

func isConflict(err error) bool { return apierrors.IsConflict(err) }
