package streamapi

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/proxy"
	"k8s.io/apiserver/pkg/registry/rest"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	restclient "k8s.io/client-go/rest"
	"k8s.io/klog/v2"

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
//
// When the proxy ends (the caller's connection closed or broke, the
// console ended, or the server stops) while the console runs, the agent
// is asked to hang it up: the container runtime need not tell the
// agent's attach that its exec went (containerd keeps a TTY exec's stdin
// and terminal open), and the console would run on with nobody on it.
// Each attach is named (agentapi.FlagSession), and the hangup names it,
// so that the end of an attach the agent refused (a second one) or that
// ended by itself touches nothing.
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
		untrack, handed := r.exec.track(), false
		defer func() {
			if !handed {
				untrack()
			}
		}()
		sj, pod, err := r.running(req.Context(), key)
		if err != nil {
			responder.Error(r.ended(req, err))
			return
		}
		at := attach{pod: pod, job: string(sj.UID), session: rand.Text()}
		r.exec.serve(w, req, at, opts, responder, r.stopping)
		if shelljob.Mode(sj) != shellv1alpha1.ModeConsole {
			return
		}
		// After the handler, so that the error response of an attach that
		// did not upgrade waits for no agent; the server's stop waits for
		// it.
		ctx := context.WithoutCancel(req.Context())
		handed = true
		go func() {
			defer untrack()
			r.hangUp(ctx, key, at)
		}()
	}), nil
}

// attach is one attach of a job, through the exec of the agent's attach
// named session in the job's worker.
type attach struct {
	pod     types.NamespacedName
	job     string
	session string
}

// hangupTimeout bounds a hangup. A stopping server waits for the hangups
// of the attaches it cut (Server.Start): with DefaultShutdownDelay before,
// that stays well within the operator's graceful shutdown
// (controllers.GracefulShutdownTimeout).
const hangupTimeout = 10 * time.Second

// hangUp asks the agent to hang up the console of job key and end attach
// at, whose proxy ended, unless the console has ended. The agent leaves
// the console alone if at is not the attach on it.
func (r *AttachREST) hangUp(ctx context.Context, key types.NamespacedName, at attach) {
	ctx, cancel := context.WithTimeout(ctx, hangupTimeout)
	defer cancel()
	if sj, err := r.jobs.get(ctx, key); err == nil && shelljob.IsFinished(sj) {
		return
	}
	log := klog.FromContext(ctx).WithValues("shelljob", key, "pod", at.pod, "session", at.session)
	switch err := r.agent.Hangup(ctx, at.pod, at.job, at.session); {
	case err == nil:
		log.V(2).Info("Attach ended; its console is hung up unless it ended too")
	case errors.Is(err, agentapi.ErrUsage):
		log.Info("The worker's agent cannot hang a console up: a cut attach leaves its console running", "error", err.Error())
	default:
		log.Error(err, "Could not hang up the console of an attach that ended")
	}
}

// running waits, for as long as the request lasts, until the job runs on
// a worker, and returns it and the worker.
func (r *AttachREST) running(ctx context.Context, key types.NamespacedName) (*shellv1alpha1.ShellJob, types.NamespacedName, error) {
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
		return nil, types.NamespacedName{}, err
	}
	pod, err := r.jobs.worker(ctx, sj)
	return sj, pod, err
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
	// active counts the attaches served, and their hangups: once
	// upgraded, a connection is no longer the HTTP server's, whose stop
	// does not wait for it.
	active sync.WaitGroup
}

// track counts an attach, or its hangup, until the function it returns
// is called.
func (p *execProxy) track() func() {
	p.active.Add(1)
	return p.active.Done
}

// wait waits until no attach is served, and no hangup under way.
func (p *execProxy) wait() { p.active.Wait() }

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

// location is the exec of the agent's attach at.
func (p *execProxy) location(at attach, opts *streamv1alpha1.ShellJobAttachOptions) *url.URL {
	return p.core.RESTClient().Post().
		Namespace(at.pod.Namespace).Resource("pods").Name(at.pod.Name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: p.container,
			Command: []string{agentapi.AgentPath, agentapi.CmdAttach,
				agentapi.FlagProtocol + "=" + strconv.Itoa(agentapi.ProtocolVersion), agentapi.FlagJob + "=" + at.job,
				agentapi.FlagSession + "=" + at.session},
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

// serve proxies req, an upgrade, to the exec of attach at, until either
// side ends it or stopping ends.
func (p *execProxy) serve(w http.ResponseWriter, req *http.Request, at attach, opts *streamv1alpha1.ShellJobAttachOptions, responder rest.Responder, stopping context.Context) {
	cw := &cuttable{ResponseWriter: w}
	defer context.AfterFunc(stopping, cw.cut)()
	h := proxy.NewUpgradeAwareHandler(p.location(at, opts), p.transport, false, true, proxy.NewErrorResponder(responder))
	h.UpgradeTransport = p.upgrade
	h.UseLocationHost = true
	out := req.Clone(req.Context())
	out.Header = http.Header{}
	for _, k := range upgradeHeaders {
		if v := req.Header.Values(k); len(v) > 0 {
			out.Header[http.CanonicalHeaderKey(k)] = v
		}
	}
	h.ServeHTTP(cw, out)
}

// cuttable is a ResponseWriter whose connection, once hijacked, can be
// cut.
type cuttable struct {
	http.ResponseWriter

	mu   sync.Mutex
	conn net.Conn
	cuts bool
}

// Hijack implements http.Hijacker.
func (c *cuttable) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := c.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, fmt.Errorf("the connection cannot be hijacked: %T", c.ResponseWriter)
	}
	conn, rw, err := h.Hijack()
	if err != nil {
		return conn, rw, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.conn = conn
	if c.cuts {
		conn.Close()
	}
	return conn, rw, nil
}

// Unwrap lets http.ResponseController reach the ResponseWriter.
func (c *cuttable) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// cut closes the hijacked connection, now or once it is hijacked.
func (c *cuttable) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cuts = true
	if c.conn != nil {
		c.conn.Close()
	}
}
