// Package streamapitest runs the stream API as an operator replica that
// does not lead runs it, in process, against envtest's API server and a
// clustertest cluster (whose own operator serves it too), and a stand-in
// kubelet for the API server's pods/exec, for the tests of the API and of
// its clients.
package streamapitest

import (
	"context"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"shelljob.dev/shelljob/controllers"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/clustertest"
	"shelljob.dev/shelljob/internal/streamapi"
	"shelljob.dev/shelljob/internal/testenv"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

// Replica is the stream API of an operator replica that does not lead:
// the operator's cache and the server, without its controllers, as the
// chart's second replica runs them. Its agent client is the cluster's
// agents. Callers reach it through a front of its own (a stand-in for its
// Service), which sends each new connection to the replica once it is
// ready, and closes it while there is none (Restart).
type Replica struct {
	t       testing.TB
	env     *testenv.Env
	cluster *clustertest.Cluster
	opts    Options
	front   *clustertest.StreamFront
	// agents are the cluster's, as the replica reaches them.
	agents *hangups

	mu   sync.Mutex
	stop func()
}

// Options configure a Replica.
type Options struct {
	// Keepalive is the server's (streamapi.Options.Keepalive).
	Keepalive time.Duration
	// Agent, when set, puts a layer between the server and the cluster's
	// agents.
	Agent func(agentapi.Client) agentapi.Client
}

// Start runs a replica until the end of the test, and returns it once it
// answers.
func Start(t testing.TB, env *testenv.Env, c *clustertest.Cluster, o Options) *Replica {
	t.Helper()
	r := &Replica{t: t, env: env, cluster: c, opts: o, front: clustertest.NewStreamFront(t, env), agents: &hangups{Client: c.Agents}}
	r.start()
	t.Cleanup(r.Stop)
	return r
}

// start runs a replica, and sends new connections to it once it is ready.
func (r *Replica) start() {
	r.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		r.t.Fatalf("listen for the stream API: %v", err)
	}
	mgr, err := ctrl.NewManager(r.env.Config, ctrl.Options{
		Scheme:                 r.env.Scheme,
		Logger:                 utiltesting.Logger(r.t).WithName("replica"),
		Cache:                  controllers.CacheOptions(r.cluster.Namespace, "", nil),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		r.t.Fatalf("replica manager: %v", err)
	}
	var agent agentapi.Client = r.agents
	if r.opts.Agent != nil {
		agent = r.opts.Agent(agent)
	}
	srv, err := streamapi.New(streamapi.Options{
		Listener:       ln,
		CertDir:        r.front.CertDir,
		AuthKubeconfig: r.env.Kubeconfig,
		Namespace:      r.cluster.Namespace,
		Cache:          mgr.GetCache(),
		APIReader:      mgr.GetAPIReader(),
		Writer:         mgr.GetClient(),
		Agent:          agent,
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
	r.front.Route(ln.Addr().String(), done)
}

// Stop stops the replica, as a deleted pod: its streams are cut, and new
// connections refused.
func (r *Replica) Stop() {
	r.front.Unroute()
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
func (r *Replica) Cut() { r.front.Cut() }

// Restart stops the replica and starts a new one behind its front, as
// the Service's next endpoint: a reader cut by the stop finds it there.
func (r *Replica) Restart() {
	r.t.Helper()
	r.Stop()
	r.start()
}

// Config is user's config, which reaches the API server, made to reach
// the replica instead, trusting its certificate.
func (r *Replica) Config(user *rest.Config) *rest.Config { return r.front.Config(user) }

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
func (r *Replica) String() string { return "stream API replica behind " + r.front.String() }

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
