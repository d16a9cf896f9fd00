package cli

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/agentclient"
)

// TerminalExec runs command in a pod's container with a terminal, as
// `kubectl exec -it` does.
type TerminalExec func(ctx context.Context, pod types.NamespacedName, command []string, opts remotecommand.StreamOptions) error

// Cluster is what the commands ask of the cluster.
type Cluster struct {
	// Client reads and writes ShellJobs, ShellPools and pods.
	Client client.WithWatch
	// Namespace holds the ShellJobs and ShellPools.
	Namespace string
	// WorkerNamespace, when set, holds the worker pods. Otherwise the
	// job's status.podNamespace or the pool's status.workerNamespace says,
	// and Namespace when they are empty (an older operator).
	WorkerNamespace string
	// Agent reaches the agent of a worker pod.
	Agent agentapi.Client
	// Exec runs a terminal in a worker pod (console).
	Exec TerminalExec
	// WhoAmI returns the Kubernetes user name the API server sees.
	WhoAmI func(ctx context.Context) (string, error)
}

// ClusterGetter makes a Cluster from the command line's flags. Tests give
// one that returns fakes.
type ClusterGetter func() (*Cluster, error)

// newScheme knows the kinds the CLI uses.
func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	// Not all of client-go's kinds: registering them costs a plugin,
	// which starts cold for every command, several milliseconds.
	_ = corev1.AddToScheme(s)
	_ = shellv1alpha1.AddToScheme(s)
	return s
}

// restMapper maps the kinds the CLI uses without asking the API server's
// discovery: a kubectl plugin starts cold each time, and discovery would
// cost a round trip or two on every command.
func restMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(shellv1alpha1.GroupVersion.WithKind("ShellJob"), meta.RESTScopeNamespace)
	m.Add(shellv1alpha1.GroupVersion.WithKind("ShellPool"), meta.RESTScopeNamespace)
	m.Add(corev1.SchemeGroupVersion.WithKind("Pod"), meta.RESTScopeNamespace)
	return m
}

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
		c, err := client.NewWithWatch(config, client.Options{Scheme: newScheme(), Mapper: restMapper()})
		if err != nil {
			return nil, err
		}
		agent, err := agentclient.New(config, agentclient.Options{Container: agentapi.WorkerContainer})
		if err != nil {
			return nil, err
		}
		// The two typed clients it needs, not a whole clientset.
		core, err := corev1client.NewForConfig(config)
		if err != nil {
			return nil, err
		}
		authn, err := authenticationv1client.NewForConfig(config)
		if err != nil {
			return nil, err
		}
		wns := *workerNamespace
		return &Cluster{
			Client:          c,
			Namespace:       ns,
			WorkerNamespace: wns,
			Agent:           agent,
			Exec:            terminalExec(config, core.RESTClient()),
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

// terminalExec execs over WebSocket, falling back to SPDY, as kubectl exec
// does.
func terminalExec(config *rest.Config, core rest.Interface) TerminalExec {
	return func(ctx context.Context, pod types.NamespacedName, command []string, opts remotecommand.StreamOptions) error {
		u := core.Post().Namespace(pod.Namespace).Resource("pods").Name(pod.Name).SubResource("exec").
			VersionedParams(&corev1.PodExecOptions{
				Container: agentapi.WorkerContainer,
				Command:   command,
				Stdin:     opts.Stdin != nil,
				Stdout:    opts.Stdout != nil,
				Stderr:    opts.Stderr != nil && !opts.Tty,
				TTY:       opts.Tty,
			}, clientgoscheme.ParameterCodec).URL()
		ex, err := agentclient.NewExecutor(config, u)
		if err != nil {
			return err
		}
		return ex.StreamWithContext(ctx, opts)
	}
}
