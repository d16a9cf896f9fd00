// Package clustertest runs the whole job path for the tests of its
// clients, without a kubelet: envtest's API server, the real operator, and
// worker pods whose agents are real daemons on this machine. The operator
// serves the stream API (internal/streamapi) beside its controllers, as
// every replica of the chart's does; its clients reach it through a
// StreamFront, since envtest's API server aggregates no API.
//
// A package that uses it makes Main its TestMain.
package clustertest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"shelljob.dev/shelljob/agent/agenttest"
	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/controllers"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/charttest"
	"shelljob.dev/shelljob/internal/streamapi"
	"shelljob.dev/shelljob/internal/testenv"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

// Main is a TestMain: in a process agenttest started it is the agent;
// otherwise it starts the API server into *env and runs the tests.
func Main(m *testing.M, env **testenv.Env) {
	agenttest.RunIfAgent()
	testenv.Main(m, env)
}

// DefaultWorkers is the number of workers of a pool that Options leave
// unset.
const DefaultWorkers = 4

// kubeletPeriod is how often the stand-in kubelet looks at the pods.
const kubeletPeriod = 50 * time.Millisecond

// Options configure a Cluster.
type Options struct {
	// Pool names the pool. Defaults to shellv1alpha1.DefaultPool.
	Pool string
	// Workers is the pool's number of workers. Defaults to DefaultWorkers.
	Workers int32
	// Operator configures the operator. Its Agent is the Cluster's.
	Operator controllers.Options
	// StreamIdle, when set, is the agents' idle limit of a stream
	// (agent.Pods.StreamIdle).
	StreamIdle time.Duration
	// Pools are more pools, created in the namespace beside the pool,
	// whose workers the stand-in kubelet starts too.
	Pools []*shellv1alpha1.ShellPool
	// WorkersApart puts the workers in a namespace of their own, the
	// namespace's name with "-workers" appended, as the chart does by
	// default; Start creates it. Operator.WorkerNamespace, when set, wins.
	WorkersApart bool
	// StreamAgent, when set, puts a layer between the stream API's server
	// and the agents; the controllers reach the agents directly.
	StreamAgent func(agentapi.Client) agentapi.Client
	// OperatorClient, when set, puts a layer between the operator's
	// controllers and the API server: to delay or fail their writes.
	OperatorClient func(client.WithWatch) client.WithWatch
}

// Cluster is a namespace of its own with the operator and a ready pool.
type Cluster struct {
	// Namespace holds the pool and its jobs, and its workers unless the
	// operator's WorkerNamespace is set.
	Namespace string
	// Pool names the pool.
	Pool string
	// Agents are the workers' agents.
	Agents *agenttest.Pods
	// Client reaches the API server as an admin.
	Client client.WithWatch
	// WorkerNamespace holds the workers: Namespace, unless the operator
	// puts them elsewhere (Options.WorkersApart).
	WorkerNamespace string
	// Stream reaches the stream API that the operator serves.
	Stream *StreamFront

	t      testing.TB
	failed sync.Map // pod UID -> true: its agent never started
}

// Start runs the operator on a namespace of its own, and a pool whose
// workers are all ready, until the end of the test. A stand-in kubelet
// starts the agent of every worker pod the operator creates, and makes
// the pod ready once it answers; it stops the agent of a pod that goes.
func Start(t *testing.T, env *testenv.Env, o Options) *Cluster {
	t.Helper()
	if o.Pool == "" {
		o.Pool = shellv1alpha1.DefaultPool
	}
	if o.Workers == 0 {
		o.Workers = DefaultWorkers
	}
	cl, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Namespace: env.Namespace(t, "t"), Pool: o.Pool, Agents: agenttest.NewPods(t), Client: cl, t: t}
	if o.StreamIdle != 0 {
		c.Agents.StreamIdle = o.StreamIdle
	}
	if o.WorkersApart && o.Operator.WorkerNamespace == "" {
		o.Operator.WorkerNamespace = c.Namespace + "-workers"
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.Operator.WorkerNamespace}}
		if err := cl.Create(context.Background(), ns); err != nil {
			t.Fatalf("create the workers namespace: %v", err)
		}
	}
	c.WorkerNamespace = cmp.Or(o.Operator.WorkerNamespace, c.Namespace)
	o.Operator.Agent = c.Agents
	var streamAgent agentapi.Client = c.Agents
	if o.StreamAgent != nil {
		streamAgent = o.StreamAgent(c.Agents)
	}
	c.startOperator(t, env, o.Operator, streamAgent, o.OperatorClient)
	pools := append([]*shellv1alpha1.ShellPool{utiltesting.MakeShellPool(o.Pool, c.Namespace).Replicas(o.Workers).Obj()}, o.Pools...)
	for _, pool := range pools {
		pool = pool.DeepCopy()
		pool.Namespace = c.Namespace
		if err := cl.Create(context.Background(), pool); err != nil {
			t.Fatalf("create pool %s: %v", pool.Name, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		wait.UntilWithContext(ctx, c.kubelet, kubeletPeriod)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	c.WaitWorkers(o.Workers)
	for _, pool := range o.Pools {
		c.WaitPoolWorkers(pool.Name, pool.Spec.Replicas)
	}
	return c
}

// startOperator runs the operator's manager on the namespace until the end
// of the test: its controllers, and its stream API server, which reaches
// the agents through streamAgent, behind c.Stream.
func (c *Cluster) startOperator(t *testing.T, env *testenv.Env, opts controllers.Options, streamAgent agentapi.Client, layer func(client.WithWatch) client.WithWatch) {
	t.Helper()
	opts.Pools = controllers.NewPoolIndex()
	var newClient client.NewClientFunc
	if layer != nil {
		newClient = func(cfg *rest.Config, o client.Options) (client.Client, error) {
			cl, err := client.NewWithWatch(cfg, o)
			if err != nil {
				return nil, err
			}
			return layer(cl), nil
		}
	}
	mgr, err := ctrl.NewManager(operatorConfig(t, env, c.Namespace), ctrl.Options{
		NewClient:              newClient,
		Scheme:                 env.Scheme,
		Logger:                 utiltesting.Logger(t).WithName("operator"),
		Cache:                  controllers.CacheOptions(c.Namespace, opts.WorkerNamespace, opts.Pools),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		// As the operator's main.
		GracefulShutdownTimeout: ptr.To(controllers.GracefulShutdownTimeout),
	})
	if err != nil {
		t.Fatalf("new manager: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if opts.Namespace == "" {
		opts.Namespace = c.Namespace
	}
	if err := controllers.Setup(ctx, mgr, opts); err != nil {
		cancel()
		t.Fatalf("set up the operator: %v", err)
	}
	c.Stream = NewStreamFront(t, env)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		t.Fatalf("listen for the stream API: %v", err)
	}
	stream, err := streamapi.New(streamapi.Options{
		Listener:        ln,
		CertDir:         c.Stream.CertDir,
		AuthKubeconfig:  env.Kubeconfig,
		Namespace:       c.Namespace,
		WorkerNamespace: opts.WorkerNamespace,
		Cache:           mgr.GetCache(),
		APIReader:       mgr.GetAPIReader(),
		Writer:          mgr.GetClient(),
		Agent:           streamAgent,
		Config:          env.Config,
		ShutdownDelay:   -1,
	})
	if err == nil {
		err = mgr.Add(stream)
	}
	if err != nil {
		cancel()
		ln.Close()
		t.Fatalf("set up the stream API: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("operator: %v", err)
		}
	}()
	t.Cleanup(func() {
		c.Stream.Unroute()
		cancel()
		<-done
	})
	c.Stream.Route(ln.Addr().String(), done)
}

// operatorConfig reaches the API server as the operator of a chart
// installed as charttest.Release in namespace: its ServiceAccount's user,
// by which the chart's admission policies know the operator (only it
// labels a job settled, for one), given every right. The chart's RBAC of
// the operator is for the e2e suite on kind to prove.
func operatorConfig(t *testing.T, env *testenv.Env, namespace string) *rest.Config {
	t.Helper()
	name := serviceaccount.MakeUsername(namespace, charttest.Release+"-operator")
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: namespace + "-operator"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: name}},
	}
	if err := env.Client.Create(context.Background(), binding); err != nil {
		t.Fatalf("give the operator its rights: %v", err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), binding) })
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: name,
		Groups: append(serviceaccount.MakeGroupNames(namespace), user.AllAuthenticated)}
	return cfg
}

// kubelet does one round of the stand-in kubelet's work.
func (c *Cluster) kubelet(ctx context.Context) {
	var pods corev1.PodList
	if err := c.Client.List(ctx, &pods, client.InNamespace(c.WorkerNamespace), client.HasLabels{shellv1alpha1.LabelPool}); err != nil {
		return
	}
	live := map[types.NamespacedName]bool{}
	var wg sync.WaitGroup
	for i := range pods.Items {
		pod := &pods.Items[i]
		key := client.ObjectKeyFromObject(pod)
		if pod.DeletionTimestamp != nil {
			continue
		}
		live[key] = true
		if _, failed := c.failed.Load(pod.UID); failed || isReady(pod) {
			continue
		}
		wg.Go(func() {
			if !c.Agents.Serving(key) {
				if err := c.Agents.Serve(key); err != nil {
					c.failed.Store(pod.UID, true)
					c.t.Errorf("kubelet: %v", err)
					return
				}
			}
			setReady(pod)
			// A conflict is tried again in the next round.
			_ = c.Client.Status().Update(ctx, pod)
		})
	}
	wg.Wait()
	for _, key := range c.Agents.Daemons() {
		if !live[key] {
			c.Agents.Stop(key)
		}
	}
}

func isReady(pod *corev1.Pod) bool {
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

func setReady(pod *corev1.Pod) {
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue,
		LastTransitionTime: metav1.Now()}}
}

// WaitWorkers waits until the pool has n ready workers of its current
// revision, as its status counts them.
func (c *Cluster) WaitWorkers(n int32) {
	c.t.Helper()
	c.WaitPoolWorkers(c.Pool, n)
}

// WaitPoolWorkers waits until pool name has n ready workers of its
// current revision, as its status counts them.
func (c *Cluster) WaitPoolWorkers(name string, n int32) {
	c.t.Helper()
	var seen string
	err := wait.PollUntilContextTimeout(context.Background(), kubeletPeriod, time.Minute, true, func(ctx context.Context) (bool, error) {
		var pool shellv1alpha1.ShellPool
		if err := c.Client.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: name}, &pool); err != nil {
			seen = err.Error()
			return false, nil
		}
		seen = fmt.Sprintf("%d ready of %d", pool.Status.ReadyReplicas, pool.Status.Replicas)
		return pool.Status.ReadyReplicas >= n, nil
	})
	if err != nil {
		c.t.Fatalf("waiting for %d ready workers of pool %s: %v; last seen: %s", n, name, err, seen)
	}
}

// Job returns job name as it is now.
func (c *Cluster) Job(ctx context.Context, name string) (*shellv1alpha1.ShellJob, error) {
	var sj shellv1alpha1.ShellJob
	if err := c.Client.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: name}, &sj); err != nil {
		return nil, err
	}
	return &sj, nil
}

// ErrNotPlaced: the job has no worker yet.
var ErrNotPlaced = errors.New("the job has no worker")

// LoseWorker loses the worker of job name, as a node that died would: its
// agent is killed with what it runs, and its pod deleted at once.
func (c *Cluster) LoseWorker(ctx context.Context, name string) error {
	sj, err := c.Job(ctx, name)
	if err != nil {
		return err
	}
	if sj.Status.Pod == "" {
		return fmt.Errorf("lose the worker of %s: %w", name, ErrNotPlaced)
	}
	key := types.NamespacedName{Namespace: c.WorkerNamespace, Name: sj.Status.Pod}
	c.Agents.Kill(key)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	if err := c.Client.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		return fmt.Errorf("lose the worker of %s: %w", name, err)
	}
	return nil
}
