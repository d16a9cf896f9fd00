package kube_test

import (
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

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

// watchClient is an admin client that can watch.
func watchClient(t *testing.T) client.WithWatch {
	t.Helper()
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func isConflict(err error) bool { return apierrors.IsConflict(err) }
