package cli

import (
	"context"
	"fmt"
	"io"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/shellclient"
	"shelljob.dev/shelljob/internal/streamclient"
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

// Stream is what the commands read and attach to through the stream API
// (stream.shelljob.dev), by job name: streamclient.Client is one.
type Stream interface {
	// Follow copies the job's output from byte offset (or, with
	// agentapi.AwaitStart, from its start once it started) to w until the
	// output is closed, resuming a broken stream, and returns the offset
	// reached.
	Follow(ctx context.Context, job string, offset int64, w io.Writer) (int64, error)
	// GetFiles writes the job's $SHELLJOB_OUT to w as a tar stream.
	GetFiles(ctx context.Context, job string, w io.Writer) error
	// Delivers tells whether Follow has the stream API mark a job it read
	// to its end delivered, when the exit it told counts no files.
	Delivers() bool
	// Attach relays streams to the console of a Console job until the
	// console ends or ctx does; a non-zero exit status of its shell comes
	// back as a utilexec.ExitError.
	Attach(ctx context.Context, job string, streams remotecommand.StreamOptions) error
}

// Cluster is what the commands ask of the cluster.
type Cluster struct {
	// Jobs reads and writes the ShellJobs of Namespace.
	Jobs JobClient
	// Pools reads the ShellPools of Namespace.
	Pools PoolClient
	// Namespace holds the ShellJobs and ShellPools.
	Namespace string
	// Stream reads the output and files of the caller's own jobs of
	// Namespace, and attaches to their consoles (myshelljobs): the jobs a
	// command has just created.
	Stream Stream
	// AnyStream reads any job of Namespace, as RBAC allows (shelljobs):
	// a job named on the command line, which may be someone else's.
	AnyStream Stream
	// WhoAmI returns the Kubernetes user name the API server sees.
	WhoAmI func(ctx context.Context) (string, error)
}

// ClusterGetter makes a Cluster from the command line's flags. Tests give
// one that returns fakes.
type ClusterGetter func() (*Cluster, error)

// NewClusterGetter returns a ClusterGetter on kubectl's flags: the
// kubeconfig, context and namespace as kubectl takes them.
func NewClusterGetter(flags *genericclioptions.ConfigFlags) ClusterGetter {
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
		own, err := streamclient.New(config, streamclient.Options{Namespace: ns, Own: true, Deliver: true})
		if err != nil {
			return nil, err
		}
		anyJob, err := streamclient.New(config, streamclient.Options{Namespace: ns})
		if err != nil {
			return nil, err
		}
		authn, err := authenticationv1client.NewForConfigAndClient(config, httpClient)
		if err != nil {
			return nil, err
		}
		return &Cluster{
			Jobs:      shell.ShellJobs(ns),
			Pools:     shell.ShellPools(ns),
			Namespace: ns,
			Stream:    own,
			AnyStream: anyJob,
			WhoAmI: func(ctx context.Context) (string, error) {
				r, err := authn.SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
				if err != nil {
					return "", fmt.Errorf("who am I: %w", err)
				}
				return r.Status.UserInfo.Username, nil
			},
		}, nil
	}
}
