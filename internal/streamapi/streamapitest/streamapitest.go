// Package streamapitest runs the stream API as an operator replica does,
// in process, against envtest's API server and a clustertest cluster, for
// the tests of the API and of its clients.
package streamapitest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/cert"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	streamv1alpha1 "shelljob.dev/shelljob/api/stream/v1alpha1"
	"shelljob.dev/shelljob/controllers"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/clustertest"
	"shelljob.dev/shelljob/internal/streamapi"
	"shelljob.dev/shelljob/internal/testenv"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

// readyTimeout bounds the wait for a replica's server to answer.
const readyTimeout = time.Minute

// Replica is the stream API of an operator replica that does not lead:
// the operator's cache and the server, without its controllers, as the
// chart's second replica runs them. Its agent client is the cluster's
// agents, its certificate made for the test. Callers reach it through a
// stand-in for its Service, which sends each new connection to the
// replica once it is ready, and refuses it while there is none (Restart).
type Replica struct {
	t       testing.TB
	env     *testenv.Env
	cluster *clustertest.Cluster
	opts    Options
	certDir string
	// CAData is the PEM of the CA of the replica's serving certificate.
	CAData []byte
	// front is the Service's address, backend the ready replica's.
	front   string
	backend atomic.Pointer[string]
	// agents are the cluster's, as the replica reaches them.
	agents *hangups

	mu   sync.Mutex
	stop func()
	// conns are the connections the Service forwards.
	conns map[net.Conn]bool
}

// Options configure a Replica.
type Options struct {
	// Keepalive is the server's (streamapi.Options.Keepalive).
	Keepalive time.Duration
}

// Start runs a replica until the end of the test, and returns it once it
// answers.
func Start(t testing.TB, env *testenv.Env, c *clustertest.Cluster, o Options) *Replica {
	t.Helper()
	r := &Replica{t: t, env: env, cluster: c, opts: o, certDir: t.TempDir(), agents: &hangups{Client: c.Agents}}
	crt, key, err := cert.GenerateSelfSignedCertKey("127.0.0.1", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The certificate, then its CA.
	r.CAData = crt
	if err := os.WriteFile(filepath.Join(r.certDir, streamapi.CertFile), crt, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(r.certDir, streamapi.KeyFile), key, 0o600); err != nil {
		t.Fatal(err)
	}
	r.serveFront()
	r.start()
	t.Cleanup(r.Stop)
	return r
}

// serveFront forwards each connection to its address to the ready
// replica, until the end of the test.
func (r *Replica) serveFront() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		r.t.Fatal(err)
	}
	r.front = ln.Addr().String()
	r.t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go r.forward(conn)
		}
	}()
}

// forward copies conn to and from the ready replica, or closes it when
// there is none.
func (r *Replica) forward(conn net.Conn) {
	defer conn.Close()
	r.mu.Lock()
	if r.conns == nil {
		r.conns = map[net.Conn]bool{}
	}
	r.conns[conn] = true
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.conns, conn)
		r.mu.Unlock()
	}()
	addr := r.backend.Load()
	if addr == nil {
		return
	}
	back, err := net.Dial("tcp", *addr)
	if err != nil {
		return
	}
	defer back.Close()
	done := make(chan struct{}, 2)
	copyTo := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go copyTo(back, conn)
	go copyTo(conn, back)
	<-done
}

// start runs a replica, and sends new connections to it once it is ready.
func (r *Replica) start() {
	r.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		r.t.Fatalf("listen for the stream API: %v", err)
	}
	addr := ln.Addr().String()
	mgr, err := ctrl.NewManager(r.env.Config, ctrl.Options{
		Scheme:                 r.env.Scheme,
		Logger:                 utiltesting.Logger(r.t).WithName("replica"),
		Cache:                  controllers.CacheOptions(r.cluster.Namespace, ""),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		r.t.Fatalf("replica manager: %v", err)
	}
	srv, err := streamapi.New(streamapi.Options{
		Listener:       ln,
		CertDir:        r.certDir,
		AuthKubeconfig: r.env.Kubeconfig,
		Namespace:      r.cluster.Namespace,
		Cache:          mgr.GetCache(),
		APIReader:      mgr.GetAPIReader(),
		Agent:          r.agents,
		Config:         r.env.Config,
		ShutdownDelay:  -1,
		Keepalive:      r.opts.Keepalive,
	})
	if err != nil {
		r.t.Fatal(err)
	}
	if err := mgr.Add(srv); err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			r.t.Errorf("replica: %v", err)
		}
	}()
	r.mu.Lock()
	r.stop = func() {
		cancel()
		<-done
	}
	r.mu.Unlock()
	r.waitReady(addr, done)
	r.backend.Store(&addr)
}

// waitReady waits until the server's /readyz answers 200, or the replica
// ended.
func (r *Replica) waitReady(addr string, ended <-chan struct{}) {
	r.t.Helper()
	cfg := r.Config(r.env.Config)
	cfg.Host = "https://" + addr
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	hc.Timeout = 5 * time.Second
	defer hc.CloseIdleConnections()
	var last string
	err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, readyTimeout, true, func(ctx context.Context) (bool, error) {
		select {
		case <-ended:
			return false, fmt.Errorf("the replica ended")
		default:
		}
		// Ready, and the client CA loaded: the admin's client
		// certificate is taken, not made anonymous.
		for _, path := range []string{"/readyz", "/apis/" + streamv1alpha1.GroupVersion.String()} {
			resp, err := hc.Get("https://" + addr + path)
			if err != nil {
				last = err.Error()
				return false, nil
			}
			resp.Body.Close()
			if last = path + ": " + resp.Status; resp.StatusCode != http.StatusOK {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		r.t.Fatalf("the stream API on %s is not ready: %v; last: %s", addr, err, last)
	}
}

// Stop stops the replica, as a deleted pod: its streams are cut, and new
// connections refused.
func (r *Replica) Stop() {
	r.backend.Store(nil)
	r.mu.Lock()
	stop := r.stop
	r.stop = nil
	r.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// Cut cuts the connections the Service forwards, as a network that
// drops them: neither end says goodbye.
func (r *Replica) Cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for conn := range r.conns {
		conn.Close()
	}
}

// Restart stops the replica and starts a new one behind its Service, as
// the Service's next endpoint: a reader cut by the stop finds it there.
func (r *Replica) Restart() {
	r.t.Helper()
	r.Stop()
	r.start()
}

// Config is user's config, which reaches the API server, made to reach
// the replica instead, trusting its certificate.
func (r *Replica) Config(user *rest.Config) *rest.Config {
	cfg := rest.CopyConfig(user)
	cfg.Host = "https://" + r.front
	cfg.TLSClientConfig.CAData = r.CAData
	cfg.TLSClientConfig.CAFile = ""
	cfg.TLSClientConfig.Insecure = false
	return cfg
}

// Hangup is a hangup that a replica asked of an agent.
type Hangup struct {
	Pod          types.NamespacedName
	Job, Session string
	// Err is how it ended.
	Err error
}

// Hangups are the hangups that the replica, and those before it, asked
// of the agents, as they ended.
func (r *Replica) Hangups() []Hangup {
	r.agents.mu.Lock()
	defer r.agents.mu.Unlock()
	return slices.Clone(r.agents.calls)
}

// hangups are the cluster's agents, with the hangups asked of them.
type hangups struct {
	agentapi.Client

	mu    sync.Mutex
	calls []Hangup
}

func (h *hangups) Hangup(ctx context.Context, pod types.NamespacedName, job, session string) error {
	err := h.Client.Hangup(ctx, pod, job, session)
	h.mu.Lock()
	h.calls = append(h.calls, Hangup{Pod: pod, Job: job, Session: session, Err: err})
	h.mu.Unlock()
	return err
}

// String is the replica's address.
func (r *Replica) String() string { return fmt.Sprintf("stream API replica behind %s", r.front) }

// Grant binds users to a Role of rules in namespace.
func Grant(t testing.TB, env *testenv.Env, namespace, role string, users []string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	if err := env.Client.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: role, Namespace: namespace}, Rules: rules}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role, Namespace: namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role},
	}
	for _, u := range users {
		binding.Subjects = append(binding.Subjects, rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: u})
	}
	if err := env.Client.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
}
