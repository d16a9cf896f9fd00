package chart_test

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/mattfenwick/cyclonus/pkg/matcher"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"shelljob.dev/shelljob/internal/netpolicy"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

// These tests prove the verdicts of the NetworkPolicies in effect once the
// chart is installed: the chart's baselines, and the operator's policies
// beside them as it writes them for a cluster's Nodes (package netpolicy),
// from the flags the chart gives it. The kind cluster cannot enforce
// NetworkPolicy (docs/kind.md), so cyclonus's matcher, the engine of SIG
// Network's policy-assistant, evaluates them.

// netCluster is a cluster the policies are evaluated on: its Nodes and the
// API server's endpoints as the operator reads them, and the addresses of
// the pods that traffic goes between.
type netCluster struct {
	nodes []*utiltesting.NodeWrapper
	// apiServer is the API server's endpoint address, on port 6443.
	apiServer string
	// node is a worker node's address; the pods' follow.
	node                                 string
	worker, bot, operator, dns, otherPod string
}

func (c netCluster) discovered() netpolicy.Cluster {
	var out netpolicy.Cluster
	for _, n := range c.nodes {
		out.Nodes = append(out.Nodes, *n.Obj())
	}
	out.Workers = []corev1.Pod{{Status: corev1.PodStatus{PodIPs: []corev1.PodIP{{IP: c.worker}}}}}
	out.APIServer = []discoveryv1.EndpointSlice{{
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{c.apiServer}}},
		Ports:       []discoveryv1.EndpointPort{{Port: ptr.To[int32](6443), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}}
	return out
}

var (
	// kindCluster is as this project's kind: kind's pod range, nodes on
	// Docker's network, the API server on the control plane's address.
	kindCluster = netCluster{
		nodes: []*utiltesting.NodeWrapper{
			utiltesting.MakeNode("shelljob-control-plane").PodCIDRs("10.244.0.0/24").InternalIP("172.18.0.3"),
			utiltesting.MakeNode("shelljob-worker").PodCIDRs("10.244.1.0/24").InternalIP("172.18.0.2"),
		},
		apiServer: "172.18.0.3", node: "172.18.0.2",
		worker: "10.244.1.10", bot: "10.244.1.5", operator: "10.244.0.7", dns: "10.244.0.3", otherPod: "10.244.1.20",
	}
	// otherRange is a cluster whose pods are on 192.168.0.0/16 (Calico's
	// default), which no chart default names.
	otherRange = netCluster{
		nodes: []*utiltesting.NodeWrapper{
			utiltesting.MakeNode("cp").PodCIDRs("192.168.0.0/24").InternalIP("172.18.0.5"),
			utiltesting.MakeNode("w1").PodCIDRs("192.168.1.0/24").InternalIP("172.18.0.6").Address(corev1.NodeExternalIP, "203.0.113.6"),
		},
		apiServer: "172.18.0.5", node: "172.18.0.6",
		worker: "192.168.1.10", bot: "192.168.1.5", operator: "192.168.0.7", dns: "192.168.0.3", otherPod: "192.168.1.20",
	}
	// ownPools is a cluster whose network plugin allocates pod addresses
	// from pools of its own: the nodes have no spec.podCIDRs.
	ownPools = netCluster{
		nodes: []*utiltesting.NodeWrapper{
			utiltesting.MakeNode("cp").InternalIP("172.18.0.5"),
			utiltesting.MakeNode("w1").InternalIP("172.18.0.6"),
		},
		apiServer: "172.18.0.5", node: "172.18.0.6",
		worker: "192.168.1.10", bot: "192.168.1.5", operator: "192.168.0.7", dns: "192.168.0.3", otherPod: "192.168.1.20",
	}
)

// verdict is what the policies must say of one flow, in each mode.
type verdict struct {
	// all: the pod network known, egress "all"; closed: the pod network
	// unknown; none: egress "none".
	all, closed, none bool
}

// flow is one connection, between peers that netPeers names.
type flow struct {
	from, to string
	port     int
	protocol corev1.Protocol
}

// TestNetworkPolicyVerdicts: each flow's verdict, on each cluster, with the
// values that cluster needs.
func TestNetworkPolicyVerdicts(t *testing.T) {
	flows := []struct {
		name string
		flow flow
		want verdict
		// ingressAlone: the release namespace's policies refuse it on their
		// own, whatever the workers' egress says.
		ingressAlone bool
	}{
		{"worker to the bot's metrics", flow{"worker", "bot", 8080, corev1.ProtocolTCP}, verdict{}, true},
		{"worker to the bot's probes", flow{"worker", "bot", 8081, corev1.ProtocolTCP}, verdict{}, true},
		{"worker to the operator's metrics", flow{"worker", "operator", 8443, corev1.ProtocolTCP}, verdict{}, true},
		{"worker to the operator's probes", flow{"worker", "operator", 8081, corev1.ProtocolTCP}, verdict{}, true},
		{"worker to the operator's stream API", flow{"worker", "operator", 8444, corev1.ProtocolTCP}, verdict{}, true},
		{"worker to DNS over UDP", flow{"worker", "dns", 53, corev1.ProtocolUDP}, verdict{true, true, true}, false},
		{"worker to DNS over TCP", flow{"worker", "dns", 53, corev1.ProtocolTCP}, verdict{true, true, true}, false},
		{"worker to a node-local DNS cache", flow{"worker", "169.254.20.10", 53, corev1.ProtocolUDP}, verdict{true, true, true}, false},
		{"worker to the metadata service", flow{"worker", "169.254.169.254", 80, corev1.ProtocolTCP}, verdict{}, false},
		{"worker to IPv6 link-local", flow{"worker", "fe80::a9fe:a9fe", 80, corev1.ProtocolTCP}, verdict{}, false},
		{"worker to a node's kubelet", flow{"worker", "node", 10250, corev1.ProtocolTCP}, verdict{}, false},
		{"worker to a node's ssh", flow{"worker", "node", 22, corev1.ProtocolTCP}, verdict{}, false},
		{"worker to a node's NodePort", flow{"worker", "node", 30080, corev1.ProtocolTCP}, verdict{}, false},
		{"worker to the API server", flow{"worker", "apiserver", 6443, corev1.ProtocolTCP}, verdict{all: true}, false},
		{"worker to the API server's node's kubelet", flow{"worker", "apiserver", 10250, corev1.ProtocolTCP}, verdict{}, false},
		{"worker to a pod of another namespace", flow{"worker", "otherpod", 80, corev1.ProtocolTCP}, verdict{all: true, closed: true}, false},
		{"worker to the internet", flow{"worker", "1.1.1.1", 443, corev1.ProtocolTCP}, verdict{all: true}, false},
		{"worker to the internet over IPv6", flow{"worker", "2606:4700:4700::1111", 443, corev1.ProtocolTCP}, verdict{all: true}, false},
		{"the API server's pod proxy to the operator's metrics", flow{"apiserver", "operator", 8443, corev1.ProtocolTCP}, verdict{all: true, none: true}, false},
		// The aggregation layer reaches the stream API from outside the
		// pod network too: once the operator knows it.
		{"the API server's aggregator to the operator's stream API", flow{"apiserver", "operator", 8444, corev1.ProtocolTCP}, verdict{all: true, none: true}, false},
		{"another node's kubelet to the bot's probes", flow{"node", "bot", 8081, corev1.ProtocolTCP}, verdict{all: true, none: true}, false},
		{"a pod of another namespace to the bot's metrics", flow{"otherpod", "bot", 8080, corev1.ProtocolTCP}, verdict{true, true, true}, false},
	}
	for _, tc := range []struct {
		name    string
		cluster netCluster
		set     []string
		mode    func(verdict) bool
	}{
		{"kind", kindCluster, nil, func(v verdict) bool { return v.all }},
		{"192.168.0.0/16 from the nodes", otherRange, nil, func(v verdict) bool { return v.all }},
		{"own pools, pod CIDRs set", ownPools, []string{"workers.networkPolicy.podCIDRs={192.168.0.0/16}"}, func(v verdict) bool { return v.all }},
		{"own pools, unknown: closed", ownPools, nil, func(v verdict) bool { return v.closed }},
		{"192.168.0.0/16 outside the configured pod CIDRs: closed", otherRange,
			[]string{"workers.networkPolicy.podCIDRs={10.244.0.0/16}"}, func(v verdict) bool { return v.closed }},
		{"kind, egress none", kindCluster, []string{"workers.networkPolicy.egress=none"}, func(v verdict) bool { return v.none }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := objects(t, valueSets[0].render(t, setArgs(tc.set)...))
			policy := matcher.BuildNetworkPolicies(true, installedPolicies(t, objs, tc.cluster.discovered()))
			peers := netPeers(t, objs, tc.cluster)
			for _, f := range flows {
				traffic := &matcher.Traffic{Source: peers(f.flow.from), Destination: peers(f.flow.to),
					ResolvedPort: f.flow.port, Protocol: f.flow.protocol}
				got := policy.IsTrafficAllowed(traffic)
				if want := tc.mode(f.want); got.IsAllowed() != want {
					t.Errorf("%s: allowed %t, want %t\n%s", f.name, got.IsAllowed(), want, got.Table())
				}
				if f.ingressAlone && got.Ingress.IsAllowed() {
					t.Errorf("%s: the release namespace's policies admit it\n%s", f.name, got.Table())
				}
			}
		})
	}
}

func setArgs(set []string) []string {
	var out []string
	for _, s := range set {
		out = append(out, "--set", s)
	}
	return out
}

// installedPolicies are the chart's NetworkPolicies and the operator's
// beside them, as it writes them from the flags the chart gives it.
func installedPolicies(t *testing.T, objs []runtime.Object, c netpolicy.Cluster) []*networkingv1.NetworkPolicy {
	t.Helper()
	flags := map[string]string{}
	for _, a := range deployment(t, objs, "shelljob-operator").Spec.Template.Spec.Containers[0].Args {
		k, v, _ := strings.Cut(a, "=")
		flags[k] = v
	}
	var cfg netpolicy.Config
	var err error
	if cfg.PodCIDRs, err = netpolicy.ParseCIDRs(flags["--pod-cidrs"]); err != nil {
		t.Fatal(err)
	}
	if cfg.DeniedCIDRs, err = netpolicy.ParseCIDRs(flags["--workers-denied-cidrs"]); err != nil {
		t.Fatal(err)
	}
	nets, unknown := netpolicy.Discover(cfg, c)
	chart := ofType[*networkingv1.NetworkPolicy](objs)
	out := chart
	for _, p := range chart {
		switch {
		case p.Name == flags["--workers-network-policy"] && flags["--workers-egress"] != "none":
			out = append(out, netpolicy.WorkersOutside(p, nets, unknown))
		case p.Name == flags["--release-network-policy"]:
			out = append(out, netpolicy.ReleaseOutside(p, nets, unknown))
		}
	}
	if len(chart) != 2 || len(out) != 4-btoi(flags["--workers-egress"] == "none") {
		t.Fatalf("%d policies from the chart, %d in all, with flags %v", len(chart), len(out), flags)
	}
	return out
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// netPeers names the peers of the flows: the chart's own pods with the
// labels its Deployments give them, a worker as the operator labels it,
// CoreDNS, a pod of another namespace, a node, the API server, and any
// other address as a host outside the cluster.
func netPeers(t *testing.T, objs []runtime.Object, c netCluster) func(string) *matcher.TrafficPeer {
	t.Helper()
	pod := func(ns, ip string, labels map[string]string) *matcher.TrafficPeer {
		return &matcher.TrafficPeer{IP: ip, Internal: &matcher.InternalPeer{
			Namespace: ns, NamespaceLabels: map[string]string{"kubernetes.io/metadata.name": ns}, PodLabels: labels}}
	}
	of := func(d *appsv1.Deployment) map[string]string { return maps.Clone(d.Spec.Template.Labels) }
	peers := map[string]*matcher.TrafficPeer{
		"worker":    pod(namespace+"-workers", c.worker, map[string]string{"shell.shelljob.dev/pool": "shell", "app.kubernetes.io/name": "shelljob-worker"}),
		"bot":       pod(namespace, c.bot, of(deployment(t, objs, "shelljob-bot"))),
		"operator":  pod(namespace, c.operator, of(deployment(t, objs, "shelljob-operator"))),
		"dns":       pod("kube-system", c.dns, map[string]string{"k8s-app": "kube-dns"}),
		"otherpod":  pod("monitoring", c.otherPod, map[string]string{"app": "prometheus"}),
		"node":      {IP: c.node},
		"apiserver": {IP: c.apiServer},
	}
	return func(name string) *matcher.TrafficPeer {
		if p, ok := peers[name]; ok {
			return p
		}
		if !strings.ContainsAny(name, ".:") {
			panic(fmt.Sprintf("no peer %q", name))
		}
		return &matcher.TrafficPeer{IP: name}
	}
}
