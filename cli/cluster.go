package cli

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/agentclient"
	"shelljob.dev/shelljob/internal/shellclient"
)

// JobClient is what the commands do with the ShellJobs of a namespace:
// client-go's typed client (shellclient.ShellJobs) is one.
type JobClient interface {
	Create(ctx context.Context, job *shellv1alpha1.ShellJob, opts metav1.CreateOptions) (*shellv1alpha1.ShellJob, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*shellv1alpha1.ShellJob, error)
	List(ctx context.Context, opts metav1.ListOptions) (*shellv1alpha1.ShellJobList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*shellv1alpha1.ShellJob, error)
}

// PoolClient is what the commands do with the ShellPools of a namespace.
type PoolClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*shellv1alpha1.ShellPool, error)
	List(ctx context.Context, opts metav1.ListOptions) (*shellv1alpha1.ShellPoolList, error)
}

// Cluster is what the commands ask of the cluster.
type Cluster struct {
	// Jobs reads and writes the ShellJobs of Namespace.
	Jobs JobClient
	// Pools reads the ShellPools of Namespace.
	Pools PoolClient
	// Namespace holds the ShellJobs and ShellPools.
	Namespace string
	// WorkerNamespace, when set, holds the worker pods. Otherwise the
	// job's status.podNamespace or the pool's status.workerNamespace says,
	// and Namespace when they are empty (an older operator).
	WorkerNamespace string
	// Agent reaches the agent of a worker pod.
	Agent agentapi.Client
	// Attacher attaches to the consoles of Console jobs.
	Attacher Attacher
	// WhoAmI returns the Kubernetes user name the API server sees.
	WhoAmI func(ctx context.Context) (string, error)
	// LastWorkers remembers where the last jobs ran; nil for nowhere.
	LastWorkers *LastWorkers
}

// ClusterGetter makes a Cluster from the command line's flags. Tests give
// one that returns fakes.
type ClusterGetter func() (*Cluster, error)

// NewClusterGetter returns a ClusterGetter on kubectl's flags: the
// kubeconfig, context and namespace as kubectl takes them. workerNamespace
// points at the flag that overrides where the worker pods are.
func NewClusterGetter(flags *genericclioptions.ConfigFlags, workerNamespace *string) ClusterGetter {
	return func() (*Cluster, error) {
		config, err := flags.ToRESTConfig()
		if err != nil {
			return nil, err
		}
		ns, _, err := flags.ToRawKubeConfigLoader().Namespace()
		if err != nil {
			return nil, err
		}
		// Typed clients, with no discovery and no controller-runtime: a
		// kubectl plugin starts cold for every command, and both would
		// cost it more than a round trip. They share one connection.
		httpClient, err := rest.HTTPClientFor(config)
		if err != nil {
			return nil, err
		}
		shell, err := shellclient.NewForConfigAndClient(config, httpClient)
		if err != nil {
			return nil, err
		}
		agent, err := agentclient.New(config, agentclient.Options{Container: agentapi.WorkerContainer})
		if err != nil {
			return nil, err
		}
		core, err := corev1client.NewForConfigAndClient(config, httpClient)
		if err != nil {
			return nil, err
		}
		authn, err := authenticationv1client.NewForConfigAndClient(config, httpClient)
		if err != nil {
			return nil, err
		}
		wns := *workerNamespace
		var cacheDir string
		if flags.CacheDir != nil {
			cacheDir = *flags.CacheDir
		}
		return &Cluster{
			Jobs:            shell.ShellJobs(ns),
			Pools:           shell.ShellPools(ns),
			Namespace:       ns,
			WorkerNamespace: wns,
			Agent:           agent,
			Attacher:        apiAttacher{config: config, rest: core.RESTClient()},
			WhoAmI: func(ctx context.Context) (string, error) {
				r, err := authn.SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
				if err != nil {
					return "", fmt.Errorf("who am I: %w", err)
				}
				return r.Status.UserInfo.Username, nil
			},
			LastWorkers: NewLastWorkers(cacheDir, config.Host),
		}, nil
	}
}
