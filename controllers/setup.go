package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/eventlimit"
	"shelljob.dev/shelljob/internal/metrics"
	"shelljob.dev/shelljob/internal/scheduler"
	"shelljob.dev/shelljob/internal/shelljob"
)

// RecorderName is the reporting controller of the operator's Events.
const RecorderName = "shelljob-operator"

// GracefulShutdownTimeout is how long the manager, told to stop, waits for
// the passes under way (ctrl.Options.GracefulShutdownTimeout). A pass goes
// on through a shutdown: its agent call (agentCallTimeout) answers, then
// its status is written (statusWriteTimeout), so that a signal sent is
// recorded. It is longer than both together, and the chart's
// terminationGracePeriodSeconds is longer still.
const GracefulShutdownTimeout = 40 * time.Second

// statusWriteTimeout bounds a pass's status patch, which a shutdown does
// not cut.
const statusWriteTimeout = 5 * time.Second

// detached is ctx without its cancellation, bounded by timeout: for the
// agent calls and the status write of a pass, which a shutdown must not
// cut in half.
func detached(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), timeout)
}

// Options configure the operator.
type Options struct {
	// Agent reaches the worker pods' agents. Required.
	Agent agentapi.Client
	// Namespace holds the pools and jobs, as the manager's cache does
	// (CacheOptions); the sweep of the settled jobs, which the cache
	// leaves out, lists them there. Empty: every namespace.
	Namespace string
	// WorkerNamespace holds the worker pods: they are created, watched,
	// exec'd and deleted there. Pools, jobs and the job counter stay in
	// their own namespace. Defaults to the pools' namespace. The manager's
	// cache must cover it (CacheOptions).
	WorkerNamespace string
	// WorkerImage is the image of pools that name none. Defaults to
	// DefaultWorkerImage.
	WorkerImage string
	// WorkerSecurity is what worker pods allow their agent, to give each
	// job namespaces of its own. Defaults to none.
	WorkerSecurity WorkerSecurity
	// StopGrace is the wait between the signals of a stop. Defaults to
	// agentapi.StopGrace.
	StopGrace time.Duration
	// DeliveryGrace bounds how long a retired worker waits for the
	// delivery of the jobs that ended on it, and how long a finished
	// Telegram job waits for it before its TTL may delete it. Defaults to
	// DefaultDeliveryGrace.
	DeliveryGrace time.Duration
	// AllowedServiceAccounts are the ServiceAccounts, in the worker
	// namespace, that a pool's workers may run as (spec.serviceAccountName).
	// A pool that names another gets no workers. Defaults to none: only
	// pools that name no ServiceAccount, whose workers get no token.
	AllowedServiceAccounts []string
	// OperatorServiceAccount is the operator's own ServiceAccount. No
	// pool's workers run as it, whatever AllowedServiceAccounts says.
	OperatorServiceAccount types.NamespacedName
	// JobTTL is how long a finished job that sets no
	// spec.ttlSecondsAfterFinished stays, counted from its end or from its
	// delivery (shelljob.Expiry). Defaults to DefaultJobTTL;
	// KeepFinishedJobs keeps such jobs.
	JobTTL time.Duration
	// HoldTimeout is how long a job may stay held (spec.hold) on its
	// worker before it fails. Defaults to DefaultHoldTimeout.
	HoldTimeout time.Duration
	// Clock tells the time. Defaults to the real clock; tests may set a
	// fake one.
	Clock clock.WithTicker
	// NetworkPolicies name the chart's baseline NetworkPolicies, beside
	// which the operator writes the ones that admit what lies outside the
	// pod network. Defaults to none written.
	NetworkPolicies NetworkPolicyOptions
	// Pools is the index that the manager's cache was built with
	// (CacheOptions). Required.
	Pools *PoolIndex
}

// Setup adds the operator to a manager: the cache indexes, the pool and
// job controllers, the placement of queued jobs (a Runnable, as Kueue's
// scheduler is), and the worker events streams. The pool reconciler and
// the placement share the placement assumptions; the job reconciler and
// the streams the jobs' memory.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	_, err := setup(ctx, mgr, opts)
	return err
}

// reconcilers are what Setup wires, for the tests to look into.
type reconcilers struct {
	pools *ShellPoolReconciler
	jobs  *ShellJobReconciler
}

func setup(ctx context.Context, mgr ctrl.Manager, opts Options) (*reconcilers, error) {
	if opts.Agent == nil {
		return nil, errors.New("controllers: Options.Agent is required")
	}
	if opts.Pools == nil {
		return nil, errors.New("controllers: Options.Pools is required: the PoolIndex the cache was built with (CacheOptions)")
	}
	if opts.WorkerImage == "" {
		opts.WorkerImage = DefaultWorkerImage
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if err := setupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return nil, err
	}
	assumed := newAssumptions()
	memory := newJobMemory()
	queues := scheduler.NewQueues()
	agent := countingAgent{Client: opts.Agent}
	reports := make(chan event.TypedGenericEvent[*shellv1alpha1.ShellJob], 1024)
	streams := newWorkerStreams(agent, mgr.GetClient(), memory, reports, opts.Clock, mgr.GetLogger().WithName("streams"))
	workers, poolWakes := newWorkerStates(), make(chan event.TypedGenericEvent[*shellv1alpha1.ShellPool], 64)
	workers.changed = func(pool types.NamespacedName) {
		wakePool(poolWakes, pool)
		queues.Wake(pool)
	}
	streams.workers = workers
	if err := mgr.Add(streams); err != nil {
		return nil, err
	}
	recorder := eventlimit.New(mgr.GetEventRecorder(RecorderName), eventlimit.Options{Dropped: metrics.EventsDropped})
	serviceAccounts := ServiceAccountPolicy{Allowed: opts.AllowedServiceAccounts, Operator: opts.OperatorServiceAccount}
	decisions := make(chan event.TypedGenericEvent[*shellv1alpha1.ShellJob], 1024)
	placement := &placer{
		cache:           mgr.GetClient(),
		poolJobs:        opts.Pools,
		queues:          queues,
		assumed:         assumed,
		workers:         workers,
		recorder:        recorder,
		notify:          decisions,
		clock:           opts.Clock,
		log:             mgr.GetLogger().WithName("placement"),
		workerNamespace: opts.WorkerNamespace,
		workerImage:     opts.WorkerImage,
		workerSecurity:  opts.WorkerSecurity,
		serviceAccounts: serviceAccounts,
	}
	if err := mgr.Add(placement); err != nil {
		return nil, err
	}
	sweep := &settledSweep{
		reader:    mgr.GetAPIReader(),
		writer:    mgr.GetClient(),
		namespace: opts.Namespace,
		every:     settledSweepEvery,
		clock:     opts.Clock,
		log:       mgr.GetLogger().WithName("settled"),
	}
	if err := mgr.Add(sweep); err != nil {
		return nil, err
	}
	pools := &ShellPoolReconciler{
		Client:          mgr.GetClient(),
		Recorder:        recorder,
		WorkerNamespace: opts.WorkerNamespace,
		WorkerImage:     opts.WorkerImage,
		WorkerSecurity:  opts.WorkerSecurity,
		ServiceAccounts: serviceAccounts,
		Clock:           opts.Clock,
		DeliveryGrace:   opts.DeliveryGrace,
		assumed:         assumed,
		poolJobs:        opts.Pools,
		streams:         streams,
		workers:         workers,
		wakes:           poolWakes,
	}
	if err := pools.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	jobs := &ShellJobReconciler{
		Client:          mgr.GetClient(),
		APIReader:       mgr.GetAPIReader(),
		WorkerNamespace: opts.WorkerNamespace,
		Agent:           agent,
		Recorder:        recorder,
		StopGrace:       opts.StopGrace,
		DeliveryGrace:   opts.DeliveryGrace,
		JobTTL:          opts.JobTTL,
		HoldTimeout:     opts.HoldTimeout,
		Clock:           opts.Clock,
		placement:       placement,
		memory:          memory,
	}
	if err := jobs.SetupWithManager(mgr, reports, decisions); err != nil {
		return nil, err
	}
	if opts.NetworkPolicies.enabled() {
		policies := &NetworkPolicyReconciler{
			Client:          mgr.GetClient(),
			Recorder:        recorder,
			WorkerNamespace: workerNamespace(opts.WorkerNamespace, opts.NetworkPolicies.Namespace),
			Options:         opts.NetworkPolicies,
		}
		if err := policies.SetupWithManager(mgr); err != nil {
			return nil, err
		}
	}
	return &reconcilers{pools: pools, jobs: jobs}, nil
}

// CacheOptions is the manager's cache for an operator of the pools and
// jobs of namespace whose workers live in workerNS (empty: the same):
// everything of namespace, and only the worker pods of workerNS, which is
// all the operator may read there; for the NetworkPolicy reconciler, the
// policies of both, the Nodes (slimmed) and the API server's
// EndpointSlices. An informer starts on first use only, so an operator
// that writes no policy reads none of these. No object keeps its managed
// fields, and jobs are slim (shelljob.Slim): the cache holds no command,
// which the operator reads from the API server once, when it starts the
// job, so that its memory does not grow with the jobs' command text; and
// it holds no settled job (shelljob.Settles), so that it does not grow
// with the finished ones either. pools, when set, indexes its ShellJobs by
// pool for the operator (Options.Pools); a cache for the stream API alone
// needs none.
func CacheOptions(namespace, workerNS string, pools *PoolIndex) cache.Options {
	workers, err := labels.NewRequirement(shellv1alpha1.LabelPool, selection.Exists, nil)
	if err != nil {
		panic(fmt.Sprintf("worker selector: %v", err))
	}
	unsettled, err := labels.NewRequirement(shellv1alpha1.LabelExpires, selection.DoesNotExist, nil)
	if err != nil {
		panic(fmt.Sprintf("job selector: %v", err))
	}
	workerNS = workerNamespace(workerNS, namespace)
	opts := cache.Options{
		DefaultNamespaces: map[string]cache.Config{namespace: {}},
		DefaultTransform:  cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&shellv1alpha1.ShellJob{}: {
				Label:     labels.NewSelector().Add(*unsettled),
				Transform: shelljob.SlimTransform,
			},
			&corev1.Pod{}: {
				Namespaces: map[string]cache.Config{workerNS: {}},
				Label:      labels.NewSelector().Add(*workers),
			},
			&networkingv1.NetworkPolicy{}: {
				Namespaces: map[string]cache.Config{namespace: {}, workerNS: {}},
			},
			&corev1.Node{}: {Transform: slimNode},
			&discoveryv1.EndpointSlice{}: {
				Namespaces: map[string]cache.Config{apiServerNamespace: {}},
				Label:      labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: apiServerService}),
			},
		},
	}
	if pools != nil {
		opts.NewInformer = pools.newInformer
	}
	return opts
}
