package cli

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/agentclient"
)

// Attacher attaches a terminal to the console of a Console job.
type Attacher interface {
	// Attach relays opts.Stdin to the terminal of job's console, its
	// output to opts.Stdout and the sizes of opts.TerminalSizeQueue to its
	// window, until the console ends or ctx does; opts.Tty is set. A
	// non-zero exit status of the console's shell comes back as a
	// utilexec.ExitError.
	Attach(ctx context.Context, job *shellv1alpha1.ShellJob, opts remotecommand.StreamOptions) error
}

// streamGroupVersion is the aggregated API that serves the streams of
// ShellJobs, their attach subresource among them.
const streamGroupVersion = "stream.shelljob.dev/v1alpha1"

// apiAttacher attaches through the attach subresource of ShellJobs in
// streamGroupVersion, with the remotecommand protocols of pods/attach:
// WebSocket, then SPDY. The API server checks the caller's right to it,
// and the operator reaches the console on its worker.
type apiAttacher struct {
	config *rest.Config
	rest   rest.Interface
}

var _ Attacher = apiAttacher{}

// Attach implements Attacher.
func (a apiAttacher) Attach(ctx context.Context, job *shellv1alpha1.ShellJob, opts remotecommand.StreamOptions) error {
	u := a.rest.Post().AbsPath("/apis", streamGroupVersion, "namespaces", job.Namespace, "shelljobs", job.Name, "attach").
		VersionedParams(&corev1.PodAttachOptions{Stdin: opts.Stdin != nil, Stdout: opts.Stdout != nil, TTY: true},
			clientgoscheme.ParameterCodec).URL()
	ex, err := agentclient.NewExecutor(a.config, u)
	if err != nil {
		return fmt.Errorf("attach to shelljob %s: %w", job.Name, err)
	}
	opts.Tty, opts.Stderr = true, nil
	return ex.StreamWithContext(ctx, opts)
}
