package controllers

import (
	"context"
	"errors"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/kubeutil"
	"shelljob.dev/shelljob/internal/netpolicy"
)

// The default/kubernetes Service, whose EndpointSlices are the API server's.
const (
	apiServerNamespace = metav1.NamespaceDefault
	apiServerService   = "kubernetes"
)

// NetworkPolicyOptions name the chart's baseline NetworkPolicies, beside
// which the operator writes the ones that admit what lies outside the pod
// network (package netpolicy). The zero value writes none.
type NetworkPolicyOptions struct {
	// Workers names the workers' baseline policy, in the worker namespace.
	// Empty: the operator writes no policy for the workers.
	Workers string
	// WorkersEgress lets the workers reach the addresses outside the pod
	// network (the chart's egress "all"); false removes the operator's
	// policy for them, leaving the baseline alone (egress "none").
	WorkersEgress bool
	// Release names the release namespace's baseline policy, in the pools'
	// namespace, which keeps the workers from the operator and the bot.
	// Empty: the operator writes no policy there.
	Release string
	// Namespace is the pools' namespace (the release's). Required when
	// Release is set.
	Namespace string
	netpolicy.Config
}

func (o NetworkPolicyOptions) enabled() bool { return o.Workers != "" || o.Release != "" }

// NetworkPolicyReconciler writes the operator's NetworkPolicies beside the
// chart's baselines from the cluster's Nodes, the worker pods and the API
// server's endpoints, and follows their changes: a node that joins is
// refused to the workers, and its pod range kept from them, as soon as
// its Node says so. Every change leads to one pass over the whole, under
// one key.
type NetworkPolicyReconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	// WorkerNamespace holds the worker pods and the workers' baseline.
	WorkerNamespace string
	Options         NetworkPolicyOptions
}

// +kubebuilder:rbac:groups=core,resources=nodes,verbs=list;watch
// +kubebuilder:rbac:groups=networking.k8s.io,namespace=shelljob-system,resources=networkpolicies,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=networking.k8s.io,namespace=shelljob-workers,resources=networkpolicies,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=discovery.k8s.io,namespace=default,resources=endpointslices,verbs=list;watch
// +kubebuilder:rbac:groups=events.k8s.io,namespace=shelljob-system,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,namespace=shelljob-workers,resources=events,verbs=create;patch

// Reconcile discovers the networks and writes both policies.
func (r *NetworkPolicyReconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	cluster, err := r.cluster(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	nets, unknown := netpolicy.Discover(r.Options.Config, cluster)
	var errs []error
	if r.Options.Workers != "" {
		build := netpolicy.WorkersOutside
		if !r.Options.WorkersEgress {
			build = nil
		}
		errs = append(errs, r.write(ctx, types.NamespacedName{Namespace: r.WorkerNamespace, Name: r.Options.Workers}, build, nets, unknown))
	}
	if r.Options.Release != "" {
		errs = append(errs, r.write(ctx, types.NamespacedName{Namespace: r.Options.Namespace, Name: r.Options.Release},
			netpolicy.ReleaseOutside, nets, unknown))
	}
	return ctrl.Result{}, errors.Join(errs...)
}

// cluster reads what Discover needs from the cache.
func (r *NetworkPolicyReconciler) cluster(ctx context.Context) (netpolicy.Cluster, error) {
	var nodes corev1.NodeList
	if err := r.Client.List(ctx, &nodes); err != nil {
		return netpolicy.Cluster{}, err
	}
	var workers corev1.PodList
	if err := r.Client.List(ctx, &workers, client.InNamespace(r.WorkerNamespace), client.HasLabels{shellv1alpha1.LabelPool}); err != nil {
		return netpolicy.Cluster{}, err
	}
	var api discoveryv1.EndpointSliceList
	if err := r.Client.List(ctx, &api, client.InNamespace(apiServerNamespace),
		client.MatchingLabels{discoveryv1.LabelServiceName: apiServerService}); err != nil {
		return netpolicy.Cluster{}, err
	}
	return netpolicy.Cluster{Nodes: nodes.Items, Workers: workers.Items, APIServer: api.Items}, nil
}

// write makes the operator's policy beside the baseline what build says,
// or removes it when build is nil or the baseline is gone. A policy that
// turns to admitting nothing is told in a Warning Event, once.
func (r *NetworkPolicyReconciler) write(ctx context.Context, baseline types.NamespacedName,
	build func(*networkingv1.NetworkPolicy, netpolicy.Networks, error) *networkingv1.NetworkPolicy,
	nets netpolicy.Networks, unknown error) error {
	ours := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: baseline.Namespace, Name: netpolicy.OutsideName(baseline.Name)}}
	base := &networkingv1.NetworkPolicy{}
	err := r.Client.Get(ctx, baseline, base)
	if apierrors.IsNotFound(err) || (err == nil && base.DeletionTimestamp != nil) {
		build = nil
	} else if err != nil {
		return err
	}
	if build == nil {
		if err := r.Client.Get(ctx, client.ObjectKeyFromObject(ours), ours); err != nil {
			return client.IgnoreNotFound(err)
		}
		return client.IgnoreNotFound(r.Client.Delete(ctx, ours))
	}
	want := build(base, nets, unknown)
	var before string
	err = kubeutil.Upsert(ctx, r.Client, ours, func() error {
		before = ours.Annotations[netpolicy.AnnotationPodNetwork]
		ours.Labels, ours.Annotations, ours.OwnerReferences, ours.Spec = want.Labels, want.Annotations, want.OwnerReferences, want.Spec
		return nil
	})
	if err != nil {
		return err
	}
	if now := ours.Annotations[netpolicy.AnnotationPodNetwork]; now != before {
		if unknown != nil {
			r.Recorder.Eventf(ours, nil, corev1.EventTypeWarning, "PodNetworkUnknown", "Discover", "%s", now)
		} else {
			r.Recorder.Eventf(ours, nil, corev1.EventTypeNormal, "PodNetwork", "Discover", "%s", now)
		}
	}
	return nil
}

// SetupWithManager wires the controller: Nodes, the worker pods' addresses,
// the API server's EndpointSlices and the policies, every change under one
// key.
func (r *NetworkPolicyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Options.Release != "" && r.Options.Namespace == "" {
		return errors.New("controllers: NetworkPolicyOptions.Namespace is required with Release")
	}
	one := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: "networkpolicies"}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("networkpolicy").
		Watches(&corev1.Node{}, one, builder.WithPredicates(changed(nodeNetwork))).
		Watches(&corev1.Pod{}, one, builder.WithPredicates(changed(podIPs), predicate.NewPredicateFuncs(func(o client.Object) bool {
			_, worker := o.GetLabels()[shellv1alpha1.LabelPool]
			return o.GetNamespace() == r.WorkerNamespace && worker
		}))).
		Watches(&discoveryv1.EndpointSlice{}, one, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetNamespace() == apiServerNamespace && o.GetLabels()[discoveryv1.LabelServiceName] == apiServerService
		}))).
		Watches(&networkingv1.NetworkPolicy{}, one, builder.WithPredicates(predicate.NewPredicateFuncs(r.concerns))).
		Complete(r)
}

// concerns tells whether a policy is a baseline or one of the operator's.
func (r *NetworkPolicyReconciler) concerns(o client.Object) bool {
	var names []types.NamespacedName
	if b := r.Options.Workers; b != "" {
		names = append(names, types.NamespacedName{Namespace: r.WorkerNamespace, Name: b},
			types.NamespacedName{Namespace: r.WorkerNamespace, Name: netpolicy.OutsideName(b)})
	}
	if b := r.Options.Release; b != "" {
		names = append(names, types.NamespacedName{Namespace: r.Options.Namespace, Name: b},
			types.NamespacedName{Namespace: r.Options.Namespace, Name: netpolicy.OutsideName(b)})
	}
	return slices.Contains(names, client.ObjectKeyFromObject(o))
}

// changed passes creates and deletes, and the updates that change key.
func changed[T client.Object](key func(T) any) predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		old, okOld := e.ObjectOld.(T)
		cur, okNew := e.ObjectNew.(T)
		return !okOld || !okNew || !equality.Semantic.DeepEqual(key(old), key(cur))
	}}
}

// nodeNetwork is what Discover reads of a node.
func nodeNetwork(n *corev1.Node) any {
	return []any{n.Spec.PodCIDRs, n.Spec.PodCIDR, n.Status.Addresses, readyStatus(n)}
}

func readyStatus(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return corev1.ConditionUnknown
}

func podIPs(p *corev1.Pod) any { return p.Status.PodIPs }

// slimNode is the cache's transform of Nodes: only what Discover reads, so
// that the operator's memory does not grow with the nodes' images and
// system info.
func slimNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	slim := &corev1.Node{
		TypeMeta: n.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion, Generation: n.Generation,
			CreationTimestamp: n.CreationTimestamp, DeletionTimestamp: n.DeletionTimestamp,
		},
		Spec:   corev1.NodeSpec{PodCIDR: n.Spec.PodCIDR, PodCIDRs: n.Spec.PodCIDRs},
		Status: corev1.NodeStatus{Addresses: n.Status.Addresses},
	}
	if s := readyStatus(n); s != corev1.ConditionUnknown {
		slim.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: s}}
	}
	return slim, nil
}
