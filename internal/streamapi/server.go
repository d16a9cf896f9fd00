package streamapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericfilters "k8s.io/apiserver/pkg/server/filters"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/apiserver/pkg/util/compatibility"
	restclient "k8s.io/client-go/rest"
	netutils "k8s.io/utils/net"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	streamv1alpha1 "shelljob.dev/shelljob/api/stream/v1alpha1"
	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/kubeutil"
)

// Defaults of Options.
const (
	// DefaultBindAddress is where the server listens: the chart's Service
	// of the APIService points at its port.
	DefaultBindAddress = ":8444"
	// DefaultShutdownDelay is how long a stopping server keeps serving,
	// its readiness failing, so that the Service's routes move to the
	// other replicas before its streams are cut: their readers resume
	// there from their offsets.
	DefaultShutdownDelay = 5 * time.Second
)

// The certificate and key files in Options.CertDir: a kubernetes.io/tls
// Secret's keys.
const (
	CertFile = "tls.crt"
	KeyFile  = "tls.key"
)

// Options configure a Server.
type Options struct {
	// BindAddress is the host:port of the HTTPS listener. Defaults to
	// DefaultBindAddress.
	BindAddress string
	// Listener, when set, is the listener, and BindAddress is ignored.
	Listener net.Listener
	// CertDir holds the serving certificate and key (CertFile, KeyFile),
	// read again when they change. Empty: a self-signed certificate made
	// in memory, which only a caller that skips verification trusts.
	CertDir string
	// AuthKubeconfig is a kubeconfig file of the API server that
	// authenticates and authorizes the callers (TokenReview,
	// SubjectAccessReview) and publishes the client CAs
	// (extension-apiserver-authentication). Empty: the in-cluster
	// config.
	AuthKubeconfig string
	// Namespace holds the jobs served; WorkerNamespace their workers.
	// Required; WorkerNamespace defaults to Namespace.
	Namespace, WorkerNamespace string
	// Cache is the operator's: its ShellJobs (slim) and worker pods.
	// Required.
	Cache cache.Cache
	// APIReader reads what the cache has not seen yet. Required.
	APIReader client.Reader
	// Writer marks the jobs delivered whose readers ask it
	// (ShellJobLogOptions.Deliver). Required.
	Writer client.Writer
	// Agent reaches the workers' agents. Required.
	Agent agentapi.Client
	// Config is the operator's own: its exec of an attach. Required.
	Config *restclient.Config
	// WorkerContainer is the worker pods' agent container. Defaults to
	// agentapi.WorkerContainer.
	WorkerContainer string
	// ShutdownDelay is how long a stopping server keeps serving. Defaults
	// to DefaultShutdownDelay; negative: none.
	ShutdownDelay time.Duration
	// Keepalive is how often a framed log that sent nothing else gets a
	// keepalive frame. Defaults to agentapi.FollowKeepalive, as the
	// agent's: a reader's idle limit (agentapi.DefaultStreamIdle) is three
	// of them.
	Keepalive time.Duration
}

// Server is the stream API server, a manager Runnable that runs on every
// replica of the operator, leader or not.
type Server struct {
	opts Options
}

var (
	_ manager.Runnable               = (*Server)(nil)
	_ manager.LeaderElectionRunnable = (*Server)(nil)
)

// New returns a Server of opts.
func New(opts Options) (*Server, error) {
	switch {
	case opts.Namespace == "":
		return nil, errors.New("stream API: Options.Namespace is required")
	case opts.Cache == nil || opts.APIReader == nil || opts.Writer == nil || opts.Agent == nil || opts.Config == nil:
		return nil, errors.New("stream API: Options.Cache, APIReader, Writer, Agent and Config are required")
	}
	if opts.BindAddress == "" {
		opts.BindAddress = DefaultBindAddress
	}
	if opts.WorkerNamespace == "" {
		opts.WorkerNamespace = opts.Namespace
	}
	if opts.WorkerContainer == "" {
		opts.WorkerContainer = agentapi.WorkerContainer
	}
	if opts.ShutdownDelay == 0 {
		opts.ShutdownDelay = DefaultShutdownDelay
	}
	if opts.Keepalive <= 0 {
		opts.Keepalive = agentapi.FollowKeepalive
	}
	return &Server{opts: opts}, nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every
// replica serves.
func (s *Server) NeedLeaderElection() bool { return false }

// Start implements manager.Runnable: it serves until ctx ends, then stops
// as DefaultShutdownDelay says.
func (s *Server) Start(ctx context.Context) error {
	j, err := s.jobs(ctx)
	if err != nil {
		return err
	}
	exec, err := newExecProxy(s.opts.Config, s.opts.WorkerContainer)
	if err != nil {
		return err
	}
	stopping, stop := context.WithCancel(context.Background())
	defer stop()
	context.AfterFunc(ctx, func() {
		time.AfterFunc(max(s.opts.ShutdownDelay, 0), stop)
	})
	server, err := s.server(j, streams{jobs: j, agent: s.opts.Agent, stopping: stopping, keepalive: s.opts.Keepalive}, exec)
	if err != nil {
		return err
	}
	err = server.PrepareRun().RunWithContext(ctx)
	// The attaches were cut as the server stopped: wait for their
	// hangups.
	exec.wait()
	return err
}

// jobs finds the jobs and workers in the cache, once it holds them.
func (s *Server) jobs(ctx context.Context) (*jobs, error) {
	inf, err := s.opts.Cache.GetInformer(ctx, &shellv1alpha1.ShellJob{})
	if err != nil {
		return nil, fmt.Errorf("stream API: shelljob informer: %w", err)
	}
	if _, err := s.opts.Cache.GetInformer(ctx, &corev1.Pod{}); err != nil {
		return nil, fmt.Errorf("stream API: pod informer: %w", err)
	}
	feed, err := kubeutil.NewFeed(inf)
	if err != nil {
		return nil, fmt.Errorf("stream API: %w", err)
	}
	return &jobs{namespace: s.opts.Namespace, workerNamespace: s.opts.WorkerNamespace,
		cache: s.opts.Cache, live: s.opts.APIReader, writer: s.opts.Writer, feed: feed}, nil
}

// server is the generic API server of the group.
func (s *Server) server(j *jobs, st streams, exec *execProxy) (*genericapiserver.GenericAPIServer, error) {
	cfg := genericapiserver.NewRecommendedConfig(codecs)
	cfg.EffectiveVersion = compatibility.DefaultBuildEffectiveVersion()
	cfg.EnableProfiling = false
	// Each subresource streams for as long as its reader wants.
	cfg.LongRunningFunc = genericfilters.BasicLongRunningRequestCheck(sets.NewString("watch"),
		sets.NewString(streamv1alpha1.SubresourceLog, streamv1alpha1.SubresourceFiles, streamv1alpha1.SubresourceAttach))
	cfg.ShutdownDelayDuration = max(s.opts.ShutdownDelay, 0)
	cfg.OpenAPIV3Config = openAPIConfig()
	cfg.SkipOpenAPIInstallation = true

	serving := genericoptions.NewSecureServingOptions()
	serving.Listener = s.opts.Listener
	if serving.Listener == nil {
		host, port, err := net.SplitHostPort(s.opts.BindAddress)
		if err != nil {
			return nil, fmt.Errorf("stream API: bind address %q: %w", s.opts.BindAddress, err)
		}
		if serving.BindPort, err = net.LookupPort("tcp", port); err != nil {
			return nil, fmt.Errorf("stream API: bind address %q: %w", s.opts.BindAddress, err)
		}
		serving.BindAddress = netutils.ParseIPSloppy(host)
		if host == "" {
			serving.BindAddress = netutils.ParseIPSloppy("0.0.0.0")
		}
	}
	if s.opts.CertDir != "" {
		serving.ServerCert.CertKey = genericoptions.CertKey{
			CertFile: filepath.Join(s.opts.CertDir, CertFile),
			KeyFile:  filepath.Join(s.opts.CertDir, KeyFile),
		}
	} else {
		serving.ServerCert.CertDirectory = ""
		serving.ServerCert.PairName = ""
		if err := serving.MaybeDefaultWithSelfSignedCerts("localhost", nil, []net.IP{netutils.ParseIPSloppy("127.0.0.1")}); err != nil {
			return nil, fmt.Errorf("stream API: self-signed certificate: %w", err)
		}
	}
	// The loopback client is the server's own, which it does not use
	// here, but which the generic server needs.
	if err := serving.WithLoopback().ApplyTo(&cfg.SecureServing, &cfg.LoopbackClientConfig); err != nil {
		return nil, fmt.Errorf("stream API: serving: %w", err)
	}

	authn := genericoptions.NewDelegatingAuthenticationOptions()
	authn.RemoteKubeConfigFile = s.opts.AuthKubeconfig
	if err := authn.ApplyTo(&cfg.Authentication, cfg.SecureServing, nil); err != nil {
		return nil, fmt.Errorf("stream API: authentication: %w", err)
	}
	authz := genericoptions.NewDelegatingAuthorizationOptions()
	authz.RemoteKubeConfigFile = s.opts.AuthKubeconfig
	if err := authz.ApplyTo(&cfg.Authorization); err != nil {
		return nil, fmt.Errorf("stream API: authorization: %w", err)
	}
	st.owners = ownerRule{jobs: j, authz: cfg.Authorization.Authorizer}
	cfg.Authorization.Authorizer = newAuthorizer(cfg.Authorization.Authorizer)

	server, err := cfg.Complete().New("shelljob-stream-api", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, fmt.Errorf("stream API: %w", err)
	}
	group := genericapiserver.NewDefaultAPIGroupInfo(streamv1alpha1.GroupName, scheme, runtime.NewParameterCodec(scheme), codecs)
	group.VersionedResourcesStorageMap[streamv1alpha1.GroupVersion.Version] = newStorage(st, exec)
	if err := server.InstallAPIGroup(&group); err != nil {
		return nil, fmt.Errorf("stream API: install %s: %w", streamv1alpha1.GroupVersion, err)
	}
	return server, nil
}
