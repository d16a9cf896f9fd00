package kube_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"shelljob.dev/shelljob/internal/testenv"
)

// env is the API server every test of the package shares; no operator
// runs, so tests write the jobs' status themselves.
var env *testenv.Env

func TestMain(m *testing.M) {
	var err error
	if env, err = testenv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop envtest:", err)
	}
	os.Exit(code)
}

// namespace makes a namespace of its own for one test.
func namespace(t *testing.T) string {
	t.Helper()
	obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "bot-"}}
	if err := env.Client.Create(context.Background(), obj); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return obj.Name
}

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
