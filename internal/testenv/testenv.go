package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
)

// Env is a running API server with the CRDs installed.
type Env struct {
	env *envtest.Environment

	// Config reaches the API server as an admin.
	Config *rest.Config
	// Client is a controller-runtime client on Scheme.
	Client client.Client
	// Scheme holds the built-in types and the shelljob API.
	Scheme *k8sruntime.Scheme
	// Kubeconfig is the path of a kubeconfig file for kubectl.
	Kubeconfig string
	// BinDir holds kube-apiserver, etcd and kubectl.
	BinDir string
}

// ErrNoAssets says that KUBEBUILDER_ASSETS is not set.
var ErrNoAssets = errors.New("KUBEBUILDER_ASSETS is not set: run the tests with `make unit`, " +
	"or export KUBEBUILDER_ASSETS=$(hack/envtest-assets.sh)")

// Start starts the API server. Call Stop when done.
func Start() (*Env, error) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		return nil, ErrNoAssets
	}
	scheme := k8sruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := shellv1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	e := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(rootDir(), "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
		Scheme:                scheme,
	}
	cfg, err := e.Start()
	if err != nil {
		// Start leaves etcd and kube-apiserver running when a later step,
		// such as installing the CRDs, fails.
		_ = e.Stop()
		return nil, fmt.Errorf("start envtest: %w", err)
	}
	env := &Env{env: e, Config: cfg, Scheme: scheme, BinDir: assets}
	if env.Client, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		_ = e.Stop()
		return nil, err
	}
	if env.Kubeconfig, err = writeKubeconfig(e); err != nil {
		_ = e.Stop()
		return nil, err
	}
	return env, nil
}

// Stop stops the API server and removes its files.
func (e *Env) Stop() error {
	if e.Kubeconfig != "" {
		_ = os.RemoveAll(filepath.Dir(e.Kubeconfig))
	}
	return e.env.Stop()
}

func writeKubeconfig(e *envtest.Environment) (string, error) {
	user, err := e.AddUser(envtest.User{Name: "envtest-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", fmt.Errorf("add envtest user: %w", err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "shelljob-envtest-")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "kubeconfig")
	return path, os.WriteFile(path, data, 0o600)
}

// rootDir is the repository root, found from this file's location.
func rootDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Main starts the API server into *env, runs the tests and stops it. Call it
// from TestMain; it does not return.
func Main(m *testing.M, env **Env) {
	var err error
	if *env, err = Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := (*env).Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop envtest:", err)
	}
	os.Exit(code)
}

// User returns a config that reaches the API server as user name, in
// groups beside system:authenticated, by a client certificate that the API
// server's client CA signed: as a kubeconfig's user, not an impersonation.
func (e *Env) User(t testing.TB, name string, groups ...string) *rest.Config {
	t.Helper()
	u, err := e.env.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		t.Fatalf("add user %s: %v", name, err)
	}
	return u.Config()
}

// Namespace creates a namespace of its own for one test, named from prefix.
func (e *Env) Namespace(t testing.TB, prefix string) string {
	t.Helper()
	obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := e.Client.Create(context.Background(), obj); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return obj.Name
}
