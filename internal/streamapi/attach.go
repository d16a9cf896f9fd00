package streamapi

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/proxy"
	"k8s.io/apiserver/pkg/registry/rest"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	restclient "k8s.io/client-go/rest"

	streamv1alpha1 "shelljob.dev/shelljob/api/stream/v1alpha1"
	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/shelljob"
)

// AttachREST serves shelljobs/attach: the caller's upgraded connection
// (WebSocket, v5.channel.k8s.io, or SPDY, as pods/attach speaks them) is
// proxied, with the operator's credentials, to the API server's pods/exec
// of the job's worker, running the agent's attach of the job. No one but
// the operator execs into a worker: the caller gets the console's
// terminal, as the job's own user, and nothing else.
type AttachREST struct {
	streams
	exec *execProxy
}

var _ rest.Connecter = (*AttachREST)(nil)

// New implements rest.Storage.
func (r *AttachREST) New() runtime.Object { return &shellv1alpha1.ShellJob{} }

// Destroy implements rest.Storage.
func (r *AttachREST) Destroy() {}

// ConnectMethods implements rest.Connecter: GET for WebSocket (RFC 6455
// upgrades a GET), POST for SPDY, as pods/attach.
func (r *AttachREST) ConnectMethods() []string { return []string{http.MethodGet, http.MethodPost} }

// NewConnectOptions implements rest.Connecter.
func (r *AttachREST) NewConnectOptions() (runtime.Object, bool, string) {
	return &streamv1alpha1.ShellJobAttachOptions{}, false, ""
}

// Connect implements rest.Connecter.
func (r *AttachREST) Connect(ctx context.Context, name string, obj runtime.Object, responder rest.Responder) (http.Handler, error) {
	opts, ok := obj.(*streamv1alpha1.ShellJobAttachOptions)
	if !ok {
		return nil, apierrors.NewInternalError(fmt.Errorf("attach options of type %T", obj))
	}
	switch {
	case !opts.Stdin && !opts.Stdout && !opts.Stderr:
		return nil, apierrors.NewBadRequest("an attach needs at least one of stdin, stdout and stderr")
	case opts.TTY && opts.Stderr:
		return nil, apierrors.NewBadRequest("a tty has no stderr of its own: with tty, stderr must be false")
	}
	key, err := r.key(ctx, name)
	if err != nil {
		return nil, err
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		pod, uid, err := r.running(req.Context(), key)
		if err != nil {
			responder.Error(r.ended(req, err))
			return
		}
		r.exec.serve(w, req, pod, uid, opts, responder)
	}), nil
}

// running waits, for as long as the request lasts, until the job runs on
// a worker, and returns the worker and the job's UID.
func (r *AttachREST) running(ctx context.Context, key types.NamespacedName) (types.NamespacedName, string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(r.stopping, cancel)()
	sj, err := r.jobs.wait(ctx, key, func(sj *shellv1alpha1.ShellJob) (bool, error) {
		if shelljob.IsFinished(sj) {
			return false, apierrors.NewBadRequest(fmt.Sprintf("shelljob %s has ended: there is nothing to attach to", sj.Name))
		}
		return shelljob.IsStarted(sj) && shelljob.IsAssigned(sj), nil
	})
	if err != nil {
		return types.NamespacedName{}, "", err
	}
	pod, err := r.jobs.worker(ctx, sj)
	return pod, string(sj.UID), err
}

// execProxy proxies upgraded connections to the API server's pods/exec,
// with the operator's credentials.
type execProxy struct {
	core      corev1client.CoreV1Interface
	container string
	// transport dials the API server; upgrade adds the operator's
	// credentials to each upgrade request.
	transport *http.Transport
	upgrade   proxy.UpgradeRequestRoundTripper
}

func newExecProxy(config *restclient.Config, container string) (*execProxy, error) {
	core, err := corev1client.NewForConfig(config)
	if err != nil {
		return nil, fmt.Errorf("exec proxy: %w", err)
	}
	tlsConfig, err := restclient.TLSConfigFor(config)
	if err != nil {
		return nil, fmt.Errorf("exec proxy: %w", err)
	}
	// No HTTP/2: an upgrade is HTTP/1.1 (the dial asks for http/1.1).
	transport := &http.Transport{TLSClientConfig: tlsConfig, Proxy: http.ProxyFromEnvironment}
	credentials, err := restclient.HTTPWrappersForConfig(config, proxy.MirrorRequest)
	if err != nil {
		return nil, fmt.Errorf("exec proxy: %w", err)
	}
	return &execProxy{core: core, container: container, transport: transport,
		upgrade: proxy.NewUpgradeRequestRoundTripper(transport, credentials)}, nil
}

// location is the exec of the agent's attach of job in pod.
func (p *execProxy) location(pod types.NamespacedName, job string, opts *streamv1alpha1.ShellJobAttachOptions) *url.URL {
	return p.core.RESTClient().Post().
		Namespace(pod.Namespace).Resource("pods").Name(pod.Name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: p.container,
			Command: []string{agentapi.AgentPath, agentapi.CmdAttach,
				agentapi.FlagProtocol + "=" + strconv.Itoa(agentapi.ProtocolVersion), agentapi.FlagJob + "=" + job},
			Stdin:  opts.Stdin,
			Stdout: opts.Stdout,
			Stderr: opts.Stderr,
			TTY:    opts.TTY,
		}, clientgoscheme.ParameterCodec).URL()
}

// upgradeHeaders are what an upgrade request carries to the API server:
// the upgrade's own, none of the caller's credentials or identity.
var upgradeHeaders = []string{
	"Connection", "Upgrade", "X-Stream-Protocol-Version",
	"Sec-Websocket-Key", "Sec-Websocket-Version", "Sec-Websocket-Protocol", "Sec-Websocket-Extensions",
	"User-Agent",
}

// serve proxies req, an upgrade, to the exec of the attach of job in pod.
func (p *execProxy) serve(w http.ResponseWriter, req *http.Request, pod types.NamespacedName, job string, opts *streamv1alpha1.ShellJobAttachOptions, responder rest.Responder) {
	h := proxy.NewUpgradeAwareHandler(p.location(pod, job, opts), p.transport, false, true, proxy.NewErrorResponder(responder))
	h.UpgradeTransport = p.upgrade
	h.UseLocationHost = true
	out := req.Clone(req.Context())
	out.Header = http.Header{}
	for _, k := range upgradeHeaders {
		if v := req.Header.Values(k); len(v) > 0 {
			out.Header[http.CanonicalHeaderKey(k)] = v
		}
	}
	h.ServeHTTP(w, out)
}
