// Command manager is the shelljob operator: the ShellPool and ShellJob
// controllers of package controllers, in one namespace, with leader
// election. It reaches the worker pods' agents by pod exec
// (internal/agentclient).
package main

import (
	"flag"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/controllers"
)

// leaderElectionID names the Lease that the operator's replicas compete for.
const leaderElectionID = "shelljob-operator.shell.shelljob.dev"

func main() {
	os.Exit(run())
}

func run() int {
	var (
		metricsAddr, probeAddr string
		leaderElect            bool
		namespace              string
		workerImage            string
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", `Address of the metrics endpoint (plain HTTP); "0" turns it off.`)
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address of the /healthz and /readyz endpoints.")
	flag.BoolVar(&leaderElect, "leader-elect", false, "Elect a leader, so that only one replica acts at a time.")
	flag.StringVar(&namespace, "namespace", defaultNamespace(),
		"The namespace to watch. Defaults to $WATCH_NAMESPACE, then to $POD_NAMESPACE, the operator's own.")
	flag.StringVar(&workerImage, "worker-image", controllers.DefaultWorkerImage, "The worker image of pools that name none.")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
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
	workers, err := labels.NewRequirement(shellv1alpha1.LabelPool, selection.Exists, nil)
	if err != nil {
		log.Error(err, "Build the worker selector")
		return 1
	}
	cfg := ctrl.GetConfigOrDie()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		Metrics:                       metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress:        probeAddr,
		LeaderElection:                leaderElect,
		LeaderElectionID:              leaderElectionID,
		LeaderElectionNamespace:       namespace,
		LeaderElectionReleaseOnCancel: true,
		Cache: cache.Options{
			DefaultNamespaces: map[string]cache.Config{namespace: {}},
			// Only the worker pods: the operator never looks at others.
			ByObject: map[client.Object]cache.ByObject{
				&corev1.Pod{}: {Label: labels.NewSelector().Add(*workers)},
			},
		},
	})
	if err != nil {
		log.Error(err, "Create the manager")
		return 1
	}
	agent, err := newAgentClient(cfg)
	if err != nil {
		log.Error(err, "Create the agent client")
		return 1
	}
	ctx := ctrl.SetupSignalHandler()
	if err := controllers.Setup(ctx, mgr, controllers.Options{Agent: agent, WorkerImage: workerImage}); err != nil {
		log.Error(err, "Set up the controllers", "controller", "shelljob")
		return 1
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		log.Error(err, "Add the health check")
		return 1
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		log.Error(err, "Add the ready check")
		return 1
	}
	log.Info("Starting the operator", "namespace", namespace, "workerImage", workerImage,
		"version", fmt.Sprint(shellv1alpha1.GroupVersion))
	if err := mgr.Start(ctx); err != nil {
		log.Error(err, "Run the manager")
		return 1
	}
	return 0
}

// defaultNamespace is $WATCH_NAMESPACE, else $POD_NAMESPACE.
func defaultNamespace() string {
	if ns := os.Getenv("WATCH_NAMESPACE"); ns != "" {
		return ns
	}
	return os.Getenv("POD_NAMESPACE")
}
