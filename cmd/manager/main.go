// Command manager is the shelljob operator: the ShellPool and ShellJob
// controllers of package controllers, for the pools and jobs of one
// namespace, with their worker pods in another (or the same), with leader
// election. It reaches the worker pods' agents by pod exec
// (internal/agentclient). Every replica, leader or not, serves the
// stream.shelljob.dev API (internal/streamapi): the jobs' output, files
// and consoles, through the API server's aggregation layer. Its metrics
// are served over HTTPS to callers that the API server authenticates and
// authorizes.
package main

import (
	"cmp"
	"crypto/tls"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/controllers"
	"shelljob.dev/shelljob/internal/netpolicy"
	"shelljob.dev/shelljob/internal/streamapi"
)

// leaderElectionID names the Lease that the operator's replicas compete for.
const leaderElectionID = "shelljob-operator.shell.shelljob.dev"

func main() {
	os.Exit(run())
}

func run() int {
	var (
		metricsAddr, probeAddr string
		metricsSecure          bool
		leaderElect            bool
		namespace, workerNS    string
		workerImage            string
		allowedSAs, selfSA     string
		jobTTL, holdTimeout    time.Duration
		warmChannels           bool
		policies               controllers.NetworkPolicyOptions
		workersEgress          string
		podCIDRs, deniedCIDRs  string
		workerSecurity         controllers.WorkerSecurity
		streamAddr, streamCert string
		pprofAddr              string
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8443", `Address of the metrics endpoint; "0" turns it off.`)
	flag.BoolVar(&metricsSecure, "metrics-secure", true,
		"Serve metrics over HTTPS, to callers the API server authenticates and authorizes (get on /metrics); false: plain HTTP.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz endpoints.")
	flag.StringVar(&pprofAddr, "pprof-bind-address", "",
		"Address of Go's /debug/pprof/ profiles (plain HTTP, with no authentication: reach it by kubectl port-forward). Empty: off.")
	flag.BoolVar(&leaderElect, "leader-elect", false, "Elect a leader, so that only one replica acts at a time.")
	flag.StringVar(&namespace, "namespace", defaultNamespace(),
		"The namespace of the pools, jobs, job counter and leader lease. Defaults to $WATCH_NAMESPACE, then to $POD_NAMESPACE, the operator's own.")
	flag.StringVar(&workerNS, "worker-namespace", "",
		"The namespace where worker pods are created, watched and exec'd. Defaults to --namespace.")
	flag.StringVar(&workerImage, "worker-image", controllers.DefaultWorkerImage, "The worker image of pools that name none.")
	flag.StringVar(&allowedSAs, "allowed-service-accounts", "",
		"Comma-separated ServiceAccounts, in the worker namespace, that pools may name (spec.serviceAccountName); "+
			"a pool that names another gets no workers. Empty: none, so only pools that name none, whose workers get no token.")
	flag.StringVar(&selfSA, "service-account", os.Getenv("POD_SERVICE_ACCOUNT"),
		"The operator's own ServiceAccount, in $POD_NAMESPACE (else --namespace): no pool's workers run as it, "+
			"whatever --allowed-service-accounts says. Defaults to $POD_SERVICE_ACCOUNT.")
	flag.DurationVar(&jobTTL, "job-ttl", controllers.DefaultJobTTL, fmt.Sprintf(
		"How long a finished job that sets no spec.ttlSecondsAfterFinished stays, counted from its end, or from its delivery once the bot marked it delivered; "+
			"a Telegram job is kept until it is delivered or %v after its end. 0 keeps such jobs.", controllers.DefaultDeliveryGrace))
	flag.BoolVar(&warmChannels, "warm-channels", true,
		"Keep a warm control channel (one long-lived exec) to each worker's agent, carrying its events, starts and signals; "+
			"false: its events stream alone, and an exec per start and per signal, as when a channel is down.")
	flag.DurationVar(&holdTimeout, "hold-timeout", controllers.DefaultHoldTimeout,
		"How long a job may stay held (spec.hold) on its worker, waiting for its client to put its input files, before it fails (HoldTimedOut).")
	flag.StringVar(&policies.Workers, "workers-network-policy", "",
		"The workers' NetworkPolicy in --worker-namespace (the chart's, which names no address): beside it the operator writes NAME-outside, "+
			"the workers' egress to every address outside the pod network but the link-local ranges, the nodes' addresses and --workers-denied-cidrs, "+
			"from the cluster's Nodes. Empty: none.")
	flag.StringVar(&workersEgress, "workers-egress", "all",
		`With --workers-network-policy: "all", the workers reach what lies outside the pod network as above; "none", they do not (NAME-outside is removed).`)
	flag.StringVar(&policies.Release, "release-network-policy", "",
		"The NetworkPolicy in --namespace that keeps the workers from the operator and the bot (the chart's): beside it the operator writes NAME-outside, "+
			"their ingress from every address outside the pod network. Empty: none.")
	flag.StringVar(&podCIDRs, "pod-cidrs", "",
		"Comma-separated CIDRs of the pod network, for a network plugin that does not give pods the nodes' spec.podCIDRs. "+
			"Empty: the nodes' spec.podCIDRs; where those are unknown, the policies admit nothing and say why.")
	flag.StringVar(&deniedCIDRs, "workers-denied-cidrs", "",
		"Comma-separated CIDRs refused to the workers beside the link-local ranges and the nodes' addresses.")
	flag.BoolVar(&workerSecurity.UserNamespaces, "worker-user-namespaces", false,
		"Run each worker pod in a user namespace of its own (hostUsers: false) with an unmasked /proc, so that its agent may give each job "+
			"PID and mount namespaces of its own: Kubernetes 1.36 or later, runc 1.2 or later.")
	flag.StringVar(&workerSecurity.SeccompProfile, "worker-seccomp-profile", "",
		"The worker pods' Localhost seccomp profile, below the kubelet's seccomp directory (such as shelljob/worker.json), which lets "+
			"the agent make each job's namespaces; every node must have it. Empty: RuntimeDefault, and jobs run in the pod's namespaces.")
	flag.StringVar(&streamAddr, "stream-api-bind-address", streamapi.DefaultBindAddress,
		`Address of the stream.shelljob.dev API server (HTTPS), which every replica serves: the jobs' output, files and consoles, for the APIService's Service; "0" turns it off.`)
	flag.StringVar(&streamCert, "stream-api-cert-dir", "",
		"Directory of the stream API's serving certificate, "+streamapi.CertFile+" and "+streamapi.KeyFile+" (a kubernetes.io/tls Secret), read again when they change, "+
			"signed by the APIService's caBundle. Empty: a self-signed one, made at start, which only an APIService that skips TLS verification takes.")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	// client-go's and the stream API server's logs go the same way.
	klog.SetLogger(ctrl.Log)
	log := ctrl.Log.WithName("setup")

	if namespace == "" {
		log.Error(nil, "No namespace to watch: set --namespace, WATCH_NAMESPACE or POD_NAMESPACE")
		return 1
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		log.Error(err, "Build the scheme")
		return 1
	}
	if err := shellv1alpha1.AddToScheme(scheme); err != nil {
		log.Error(err, "Build the scheme")
		return 1
	}
	if workerNS == "" {
		workerNS = namespace
	}
	allowed, err := parseServiceAccounts(allowedSAs)
	if err != nil {
		log.Error(err, "Parse --allowed-service-accounts")
		return 1
	}
	if policies.Config.PodCIDRs, err = netpolicy.ParseCIDRs(podCIDRs); err != nil {
		log.Error(err, "Parse --pod-cidrs")
		return 1
	}
	if policies.Config.DeniedCIDRs, err = netpolicy.ParseCIDRs(deniedCIDRs); err != nil {
		log.Error(err, "Parse --workers-denied-cidrs")
		return 1
	}
	switch workersEgress {
	case "all", "none":
		policies.WorkersEgress = workersEgress == "all"
	default:
		log.Error(nil, `--workers-egress must be "all" or "none"`, "value", workersEgress)
		return 1
	}
	policies.Namespace = namespace
	self := types.NamespacedName{Namespace: cmp.Or(os.Getenv("POD_NAMESPACE"), namespace), Name: selfSA}
	if jobTTL <= 0 {
		jobTTL = controllers.KeepFinishedJobs
	}
	metrics := metricsserver.Options{
		BindAddress:   metricsAddr,
		SecureServing: metricsSecure,
		// HTTP/1.1 only, as kubebuilder's scaffold: HTTP/2 Rapid Reset
		// (CVE-2023-44487, CVE-2023-39325).
		TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }},
	}
	if metricsSecure {
		metrics.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	cfg := ctrl.GetConfigOrDie()
	pools := controllers.NewPoolIndex()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		Metrics:                       metrics,
		HealthProbeBindAddress:        probeAddr,
		PprofBindAddress:              pprofAddr,
		LeaderElection:                leaderElect,
		LeaderElectionID:              leaderElectionID,
		LeaderElectionNamespace:       namespace,
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       ptr.To(controllers.GracefulShutdownTimeout),
		Cache:                         controllers.CacheOptions(namespace, workerNS, pools),
	})
	if err != nil {
		log.Error(err, "Create the manager")
		return 1
	}
	agent, err := newAgentClient(cfg, warmChannels)
	if err != nil {
		log.Error(err, "Create the agent client")
		return 1
	}
	ctx := ctrl.SetupSignalHandler()
	opts := controllers.Options{
		Agent:                  agent,
		Namespace:              namespace,
		WorkerNamespace:        workerNS,
		WorkerImage:            workerImage,
		WorkerSecurity:         workerSecurity,
		AllowedServiceAccounts: allowed,
		OperatorServiceAccount: self,
		JobTTL:                 jobTTL,
		HoldTimeout:            holdTimeout,
		NetworkPolicies:        policies,
		Pools:                  pools,
	}
	if err := controllers.Setup(ctx, mgr, opts); err != nil {
		log.Error(err, "Set up the controllers", "controller", "shelljob")
		return 1
	}
	if streamAddr != "0" {
		stream, err := streamapi.New(streamapi.Options{
			BindAddress:     streamAddr,
			CertDir:         streamCert,
			Namespace:       namespace,
			WorkerNamespace: workerNS,
			Cache:           mgr.GetCache(),
			APIReader:       mgr.GetAPIReader(),
			Writer:          mgr.GetClient(),
			Agent:           agent,
			Config:          cfg,
		})
		if err == nil {
			err = mgr.Add(stream)
		}
		if err != nil {
			log.Error(err, "Set up the stream API")
			return 1
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		log.Error(err, "Add the health check")
		return 1
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		log.Error(err, "Add the ready check")
		return 1
	}
	log.Info("Starting the operator", "namespace", namespace, "workerNamespace", workerNS, "workerImage", workerImage,
		"allowedServiceAccounts", allowed, "serviceAccount", self, "jobTTL", jobTTL,
		"streamAPI", streamAddr, "workersNetworkPolicy", policies.Workers, "workersEgress", workersEgress, "releaseNetworkPolicy", policies.Release, "podCIDRs", podCIDRs,
		"version", fmt.Sprint(shellv1alpha1.GroupVersion))
	if err := mgr.Start(ctx); err != nil {
		log.Error(err, "Run the manager")
		return 1
	}
	return 0
}

// parseServiceAccounts splits a comma-separated list of ServiceAccount
// names, each a DNS-1123 subdomain.
func parseServiceAccounts(list string) ([]string, error) {
	var out []string
	for name := range strings.SplitSeq(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			return nil, fmt.Errorf("ServiceAccount %q: %s", name, strings.Join(errs, "; "))
		}
		out = append(out, name)
	}
	return out, nil
}

// defaultNamespace is $WATCH_NAMESPACE, else $POD_NAMESPACE.
func defaultNamespace() string {
	if ns := os.Getenv("WATCH_NAMESPACE"); ns != "" {
		return ns
	}
	return os.Getenv("POD_NAMESPACE")
}
