//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mattfenwick/cyclonus/pkg/matcher"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

// The chart's NetworkPolicies and the operator's beside them
// (<name>-outside), as hack/stack.sh installs them.
const (
	workersPolicy = "shelljob-workers"
	releasePolicy = "shelljob-deny-workers"
	// NetworkPolicyTimeout covers the operator seeing a Node change and
	// writing its policy.
	NetworkPolicyTimeout = 30 * time.Second
)

// excepted tells whether cidr lies inside one of the except lists of the
// block of its family.
func excepted(blocks map[string][]string, cidr string) bool {
	p := netip.MustParsePrefix(cidr)
	all := "0.0.0.0/0"
	if p.Addr().Is6() {
		all = "::/0"
	}
	return slices.ContainsFunc(blocks[all], func(e string) bool {
		q := netip.MustParsePrefix(e)
		return q.Bits() <= p.Bits() && q.Contains(p.Addr())
	})
}

func host(addr string) string {
	a := netip.MustParseAddr(addr)
	return netip.PrefixFrom(a, a.BitLen()).String()
}

func getPolicy(t *testing.T, ns, name string) *networkingv1.NetworkPolicy {
	t.Helper()
	p := &networkingv1.NetworkPolicy{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, p); err != nil {
		t.Fatalf("NetworkPolicy %s/%s: %v", ns, name, err)
	}
	return p
}

// TestNetworkPolicies: on the installed chart, the operator's policies
// beside the chart's name the real cluster's pod CIDRs and node addresses
// and the link-local ranges; cyclonus finds the verdicts on the live
// policies for the real pods' addresses and labels; and a Node that joins
// is refused to the workers, and its pod range kept from them, until it
// goes.
func TestNetworkPolicies(t *testing.T) {
	ctx := context.Background()
	// Its workers are the ones whose addresses the operator checks, and
	// the source of the verdicts below.
	EnsurePool(t, EnsurePoolInput{Name: Pool, Replicas: PoolSize})
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		t.Fatal(err)
	}
	var podCIDRs, nodeIPs []string
	for _, n := range nodes.Items {
		podCIDRs = append(podCIDRs, n.Spec.PodCIDRs...)
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP || a.Type == corev1.NodeExternalIP {
				nodeIPs = append(nodeIPs, a.Address)
			}
		}
	}
	if len(podCIDRs) == 0 || len(nodeIPs) == 0 {
		t.Fatalf("nodes' pod CIDRs %v, addresses %v", podCIDRs, nodeIPs)
	}
	var workersOut, releaseOut *networkingv1.NetworkPolicy
	poll(t, NetworkPolicyTimeout, "the operator's policies for this cluster", func() (bool, string) {
		workersOut = getPolicy(t, WorkerNamespace, workersPolicy+"-outside")
		releaseOut = getPolicy(t, Namespace, releasePolicy+"-outside")
		blocks := utiltesting.IPBlocks(workersOut)
		for _, want := range slices.Concat(podCIDRs, []string{"169.254.0.0/16", "fe80::/10"}) {
			if !excepted(blocks, want) {
				return false, fmt.Sprintf("%s not refused to the workers: %v", want, blocks)
			}
		}
		for _, ip := range nodeIPs {
			if !excepted(blocks, host(ip)) {
				return false, fmt.Sprintf("node %s not refused to the workers: %v", ip, blocks)
			}
		}
		return true, ""
	})
	t.Logf("%s: %s; %v", workersOut.Name, workersOut.Annotations["shell.shelljob.dev/pod-network"], utiltesting.IPBlocks(workersOut))
	if got := workersOut.Annotations["shell.shelljob.dev/pod-network"]; !strings.HasSuffix(got, "(the nodes' spec.podCIDRs)") {
		t.Errorf("pod network %q, want the nodes'", got)
	}
	relBlocks := utiltesting.IPBlocks(releaseOut)
	for _, cidr := range podCIDRs {
		if !excepted(relBlocks, cidr) {
			t.Errorf("the release namespace admits the pod CIDR %s: %v", cidr, relBlocks)
		}
	}
	for _, ip := range nodeIPs {
		if excepted(relBlocks, host(ip)) {
			t.Errorf("the release namespace refuses node %s (the API server's pod proxy, the kubelets): %v", ip, relBlocks)
		}
	}

	// The verdicts on the live policies, for the real pods.
	var policies []*networkingv1.NetworkPolicy
	for _, ns := range []string{Namespace, WorkerNamespace} {
		var list networkingv1.NetworkPolicyList
		if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for i := range list.Items {
			policies = append(policies, &list.Items[i])
		}
	}
	policy := matcher.BuildNetworkPolicies(true, policies)
	pod := func(ns string, labels client.MatchingLabels) *matcher.TrafficPeer {
		t.Helper()
		var list corev1.PodList
		if err := c.List(ctx, &list, client.InNamespace(ns), labels); err != nil || len(list.Items) == 0 {
			t.Fatalf("pods %v in %s: %d, %v", labels, ns, len(list.Items), err)
		}
		p := list.Items[0]
		var nsObj corev1.Namespace
		if err := c.Get(ctx, client.ObjectKey{Name: ns}, &nsObj); err != nil {
			t.Fatal(err)
		}
		return &matcher.TrafficPeer{IP: p.Status.PodIP,
			Internal: &matcher.InternalPeer{Namespace: ns, NamespaceLabels: nsObj.Labels, PodLabels: p.Labels}}
	}
	var api discoveryv1.EndpointSlice
	if err := c.Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceDefault, Name: "kubernetes"}, &api); err != nil {
		t.Fatal(err)
	}
	worker := pod(WorkerNamespace, client.MatchingLabels{shellv1alpha1.LabelPool: Pool})
	bot := pod(Namespace, client.MatchingLabels{"app.kubernetes.io/component": "bot"})
	operator := pod(Namespace, client.MatchingLabels{"app.kubernetes.io/component": "operator"})
	dns := pod("kube-system", client.MatchingLabels{"k8s-app": "kube-dns"})
	apiServer := &matcher.TrafficPeer{IP: api.Endpoints[0].Addresses[0]}
	for _, tc := range []struct {
		name     string
		from, to *matcher.TrafficPeer
		port     int
		protocol corev1.Protocol
		want     bool
	}{
		{"worker to the bot's metrics", worker, bot, 8080, corev1.ProtocolTCP, false},
		{"worker to the operator's metrics", worker, operator, 8443, corev1.ProtocolTCP, false},
		{"worker to the operator's probes", worker, operator, 8081, corev1.ProtocolTCP, false},
		{"worker to CoreDNS", worker, dns, 53, corev1.ProtocolUDP, true},
		{"worker to the metadata service", worker, &matcher.TrafficPeer{IP: "169.254.169.254"}, 80, corev1.ProtocolTCP, false},
		{"worker to the API server", worker, apiServer, int(*api.Ports[0].Port), corev1.ProtocolTCP, true},
		{"worker to the internet", worker, &matcher.TrafficPeer{IP: "1.1.1.1"}, 443, corev1.ProtocolTCP, true},
		{"the API server's node to the operator's metrics", apiServer, operator, 8443, corev1.ProtocolTCP, true},
	} {
		got := policy.IsTrafficAllowed(&matcher.Traffic{Source: tc.from, Destination: tc.to, ResolvedPort: tc.port, Protocol: tc.protocol})
		if got.IsAllowed() != tc.want {
			t.Errorf("%s: allowed %t, want %t\n%s", tc.name, got.IsAllowed(), tc.want, got.Table())
		}
	}
	for _, ip := range nodeIPs {
		got := policy.IsTrafficAllowed(&matcher.Traffic{Source: worker, Destination: &matcher.TrafficPeer{IP: ip},
			ResolvedPort: 10250, Protocol: corev1.ProtocolTCP})
		if got.IsAllowed() {
			t.Errorf("worker to node %s's kubelet: allowed\n%s", ip, got.Table())
		}
	}

	// A node joins: a Node object the controller manager gives a pod range
	// as it would a real one (tainted, so that nothing is scheduled on it).
	joining := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-joining-" + rand.String(5)},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{
			{Key: "e2e.shelljob.dev/not-a-node", Effect: corev1.TaintEffectNoSchedule},
			{Key: "e2e.shelljob.dev/not-a-node", Effect: corev1.TaintEffectNoExecute},
		}},
	}
	if err := c.Create(ctx, joining); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), joining) })
	const joiningIP = "172.31.255.77"
	// The node controller writes the new node too (its podCIDRs, taints):
	// set the address on the latest version.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(joining), joining); err != nil {
			return err
		}
		joining.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: joiningIP}}
		return c.Status().Update(ctx, joining)
	}); err != nil {
		t.Fatal(err)
	}
	poll(t, NetworkPolicyTimeout, "the joining node's pod range", func() (bool, string) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(joining), joining); err != nil {
			return false, err.Error()
		}
		return len(joining.Spec.PodCIDRs) > 0, "none yet"
	})
	poll(t, NetworkPolicyTimeout, "the joining node refused to the workers, its pod range kept from them", func() (bool, string) {
		blocks := utiltesting.IPBlocks(getPolicy(t, WorkerNamespace, workersPolicy+"-outside"))
		return excepted(blocks, host(joiningIP)) && excepted(blocks, joining.Spec.PodCIDRs[0]), fmt.Sprint(blocks)
	})
	if err := c.Delete(ctx, joining); err != nil {
		t.Fatal(err)
	}
	poll(t, NetworkPolicyTimeout, "the node's address let go once it left", func() (bool, string) {
		blocks := utiltesting.IPBlocks(getPolicy(t, WorkerNamespace, workersPolicy+"-outside"))
		return !excepted(blocks, host(joiningIP)), fmt.Sprint(blocks)
	})
}
