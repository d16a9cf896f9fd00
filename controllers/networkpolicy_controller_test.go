package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/netpolicy"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

// baselinePolicy is a policy as the chart's baselines: it selects pods and
// names no address.
func baselinePolicy(t *testing.T, ns, name string, sel metav1.LabelSelector) *networkingv1.NetworkPolicy {
	t.Helper()
	p := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app.kubernetes.io/instance": "t"}},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: sel,
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}},
	}
	if err := env.Client.Create(context.Background(), p); err != nil {
		t.Fatalf("create policy %s: %v", name, err)
	}
	return p
}

// createNode creates a node and sets its status, as the kubelet would; the
// test deletes it at its end.
func createNode(t *testing.T, w *utiltesting.NodeWrapper) {
	t.Helper()
	ctx := context.Background()
	n := w.Obj().DeepCopy()
	status := n.Status
	if err := env.Client.Create(ctx, n); err != nil {
		t.Fatalf("create node %s: %v", n.Name, err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), n) })
	n.Status = status
	if err := env.Client.Status().Update(ctx, n); err != nil {
		t.Fatalf("node %s status: %v", n.Name, err)
	}
}

// outsidePolicy reads the operator's policy beside a baseline; nil if
// there is none.
func outsidePolicy(t *testing.T, ns, baseline string) *networkingv1.NetworkPolicy {
	t.Helper()
	p := &networkingv1.NetworkPolicy{}
	err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: netpolicy.OutsideName(baseline)}, p)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// excepts are a policy's except lists by CIDR and, for the waits'
// messages, what it holds.
func excepts(p *networkingv1.NetworkPolicy) (map[string][]string, string) {
	if p == nil {
		return nil, "no policy"
	}
	out := utiltesting.IPBlocks(p)
	return out, fmt.Sprintf("blocks %v, %s", out, p.Annotations[netpolicy.AnnotationPodNetwork])
}

// TestNetworkPolicies: the operator writes the policies beside the chart's
// baselines from the Nodes and follows them: unknown at first (no node), so
// they admit nothing and a Warning says why; then a node's range and
// address, a second node joining, a worker with an address outside the
// nodes' ranges (closed again), and a baseline removed.
func TestNetworkPolicies(t *testing.T) {
	ctx := context.Background()
	ns, wns := namespace(t), env.Namespace(t, "w")
	workers := baselinePolicy(t, wns, "t-workers", metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: shellv1alpha1.LabelPool, Operator: metav1.LabelSelectorOpExists}}})
	baselinePolicy(t, ns, "t-deny-workers", metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/component": "bot"}})
	startOperatorWith(t, ns, Options{Agent: newFakeAgent(), WorkerNamespace: wns, StopGrace: testStopGrace,
		NetworkPolicies: NetworkPolicyOptions{Workers: "t-workers", WorkersEgress: true, Release: "t-deny-workers", Namespace: ns}})

	eventually(t, waitShort, "both policies, admitting nothing while no node has a range", func() (bool, string) {
		w, r := outsidePolicy(t, wns, "t-workers"), outsidePolicy(t, ns, "t-deny-workers")
		if w == nil || r == nil {
			return false, "missing"
		}
		closed := len(w.Spec.Egress) == 0 && len(r.Spec.Ingress) == 0 &&
			strings.Contains(w.Annotations[netpolicy.AnnotationPodNetwork], "unknown, so this policy admits nothing: no node has spec.podCIDRs yet")
		_, seen := excepts(w)
		return closed, seen
	})
	w := outsidePolicy(t, wns, "t-workers")
	if len(w.OwnerReferences) != 1 || w.OwnerReferences[0].UID != workers.UID {
		t.Errorf("owners %+v, want the baseline %s", w.OwnerReferences, workers.UID)
	}
	if !slices.Equal(w.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}) {
		t.Errorf("policy types %v, want Egress", w.Spec.PolicyTypes)
	}
	waitEvents(t, wns, w.Name, "PodNetworkUnknown")

	createNode(t, utiltesting.MakeNode(ns+"-a").PodCIDRs("10.244.0.0/24").InternalIP("172.18.0.2"))
	// Joining: no range yet, not Ready. It must not close the policies.
	createNode(t, utiltesting.MakeNode(ns+"-b").NotReady().InternalIP("172.18.0.3"))
	eventually(t, waitShort, "the first node's range kept from the workers, both nodes refused", func() (bool, string) {
		got, seen := excepts(outsidePolicy(t, wns, "t-workers"))
		return slices.Equal(got["0.0.0.0/0"], []string{"10.244.0.0/24", "169.254.0.0/16", "172.18.0.2/31"}) &&
			slices.Equal(got["::/0"], []string{"fe80::/10"}), seen
	})
	eventually(t, waitShort, "the operator and the bot admitting all but the pod network", func() (bool, string) {
		got, seen := excepts(outsidePolicy(t, ns, "t-deny-workers"))
		return slices.Equal(got["0.0.0.0/0"], []string{"10.244.0.0/24"}), seen
	})
	waitEvents(t, wns, w.Name, "PodNetworkUnknown", "PodNetwork")
	// The API server stays reachable on its own port, node address or not.
	api := &discoveryv1.EndpointSlice{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: metav1.NamespaceDefault, Name: "kubernetes"}, api); err != nil {
		t.Fatalf("the API server's EndpointSlice: %v", err)
	}
	addr, port := api.Endpoints[0].Addresses[0], *api.Ports[0].Port
	if rules := outsidePolicy(t, wns, "t-workers").Spec.Egress; len(rules) != 2 || rules[1].To[0].IPBlock.CIDR != addr+"/32" ||
		rules[1].Ports[0].Port.IntVal != port {
		t.Errorf("egress rules %+v, want the second to %s:%d", rules, addr, port)
	}

	// The second node gets its range and becomes Ready: followed.
	b := &corev1.Node{}
	if err := env.Client.Get(ctx, types.NamespacedName{Name: ns + "-b"}, b); err != nil {
		t.Fatal(err)
	}
	b.Spec.PodCIDRs, b.Spec.PodCIDR = []string{"10.244.1.0/24"}, "10.244.1.0/24"
	if err := env.Client.Update(ctx, b); err != nil {
		t.Fatal(err)
	}
	b.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	if err := env.Client.Status().Update(ctx, b); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitShort, "both nodes' ranges, merged", func() (bool, string) {
		got, seen := excepts(outsidePolicy(t, wns, "t-workers"))
		return slices.Equal(got["0.0.0.0/0"], []string{"10.244.0.0/23", "169.254.0.0/16", "172.18.0.2/31"}), seen
	})

	// A worker whose address is not in the nodes' ranges: the plugin gives
	// pods addresses of its own, so the pod network is unknown again.
	if err := env.Client.Create(ctx, utiltesting.MakeShellPool("shell", ns).Replicas(1).Obj()); err != nil {
		t.Fatal(err)
	}
	pod := &markWorkersReadyIn(t, ns, wns, "shell", 1)[0]
	pod.Status.PodIP, pod.Status.PodIPs = "192.168.3.4", []corev1.PodIP{{IP: "192.168.3.4"}}
	if err := env.Client.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitShort, "both closed, naming the worker", func() (bool, string) {
		w, r := outsidePolicy(t, wns, "t-workers"), outsidePolicy(t, ns, "t-deny-workers")
		_, seen := excepts(w)
		return len(w.Spec.Egress) == 0 && len(r.Spec.Ingress) == 0 &&
			strings.Contains(w.Annotations[netpolicy.AnnotationPodNetwork], "worker pod "+pod.Name+" has address 192.168.3.4"), seen
	})

	// The baseline goes (the chart's networkPolicy.enabled turned off): so
	// does the operator's policy beside it, and the other stays.
	if err := env.Client.Delete(ctx, workers); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitShort, "the workers' outside policy gone with its baseline", func() (bool, string) {
		return outsidePolicy(t, wns, "t-workers") == nil && outsidePolicy(t, ns, "t-deny-workers") != nil, "still there"
	})
}

// TestNetworkPoliciesEgressNone: with egress "none" the workers get no
// policy beside their baseline, and one left from egress "all" is removed;
// the release namespace's is still written.
func TestNetworkPoliciesEgressNone(t *testing.T) {
	ns, wns := namespace(t), env.Namespace(t, "w")
	sel := metav1.LabelSelector{MatchLabels: map[string]string{"x": "y"}}
	workers := baselinePolicy(t, wns, "t-workers", sel)
	baselinePolicy(t, ns, "t-deny-workers", sel)
	left := netpolicy.WorkersOutside(workers, netpolicy.Networks{}, fmt.Errorf("left by an earlier operator"))
	left.TypeMeta = metav1.TypeMeta{}
	if err := env.Client.Create(context.Background(), left); err != nil {
		t.Fatal(err)
	}
	startOperatorWith(t, ns, Options{Agent: newFakeAgent(), WorkerNamespace: wns, StopGrace: testStopGrace,
		NetworkPolicies: NetworkPolicyOptions{Workers: "t-workers", Release: "t-deny-workers", Namespace: ns}})
	eventually(t, waitShort, "no workers' outside policy, the release's written", func() (bool, string) {
		return outsidePolicy(t, wns, "t-workers") == nil && outsidePolicy(t, ns, "t-deny-workers") != nil, "not yet"
	})
}
