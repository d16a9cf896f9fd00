package netpolicy

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	utiltesting "shelljob.dev/shelljob/internal/testing"
)

func prefixes(s ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(s))
	for i, p := range s {
		out[i] = netip.MustParsePrefix(p)
	}
	return out
}

func nodes(ws ...*utiltesting.NodeWrapper) []corev1.Node {
	out := make([]corev1.Node, len(ws))
	for i, w := range ws {
		out[i] = *w.Obj()
	}
	return out
}

func worker(name string, ips ...string) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	return p
}

// apiServer is the default/kubernetes EndpointSlice of the addresses, on
// port 6443.
func apiServer(t discoveryv1.AddressType, addrs ...string) discoveryv1.EndpointSlice {
	return discoveryv1.EndpointSlice{
		AddressType: t,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: addrs}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To[int32](6443), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
}

func TestDiscover(t *testing.T) {
	kind := nodes(
		utiltesting.MakeNode("cp").PodCIDRs("10.244.0.0/24").InternalIP("172.18.0.3").Address(corev1.NodeHostName, "cp"),
		utiltesting.MakeNode("w1").PodCIDRs("10.244.1.0/24").InternalIP("172.18.0.2"),
	)
	for name, tc := range map[string]struct {
		cfg  Config
		c    Cluster
		want Networks
		// wantErr is a part of the error; empty: none.
		wantErr string
	}{
		"kind: the nodes' ranges merged, their addresses and link-local refused": {
			c: Cluster{Nodes: kind, Workers: []corev1.Pod{worker("w-0", "10.244.1.7")},
				APIServer: []discoveryv1.EndpointSlice{apiServer(discoveryv1.AddressTypeIPv4, "172.18.0.3")}},
			want: Networks{
				Pods: prefixes("10.244.0.0/23"), Source: "the nodes' spec.podCIDRs",
				Denied:    prefixes("169.254.0.0/16", "172.18.0.2/31", "fe80::/10"),
				APIServer: []netip.AddrPort{netip.MustParseAddrPort("172.18.0.3:6443")},
			},
		},
		"another range: 192.168.0.0/16 pods, nodes on 172.18.0.x": {
			c: Cluster{Nodes: nodes(
				utiltesting.MakeNode("a").PodCIDRs("192.168.0.0/24").InternalIP("172.18.0.5"),
				utiltesting.MakeNode("b").PodCIDRs("192.168.2.0/24").InternalIP("172.18.0.9").Address(corev1.NodeExternalIP, "203.0.113.9"),
			)},
			want: Networks{
				Pods: prefixes("192.168.0.0/24", "192.168.2.0/24"), Source: "the nodes' spec.podCIDRs",
				Denied: prefixes("169.254.0.0/16", "172.18.0.5/32", "172.18.0.9/32", "203.0.113.9/32", "fe80::/10"),
			},
		},
		"dual stack": {
			c: Cluster{Nodes: nodes(
				utiltesting.MakeNode("a").PodCIDRs("10.244.0.0/24", "fd00:10:244::/64").InternalIP("172.18.0.2").InternalIP("fc00:f853:ccd:e793::2"),
			), Workers: []corev1.Pod{worker("w-0", "10.244.0.9", "fd00:10:244::9")}},
			want: Networks{
				Pods: prefixes("10.244.0.0/24", "fd00:10:244::/64"), Source: "the nodes' spec.podCIDRs",
				Denied: prefixes("169.254.0.0/16", "172.18.0.2/32", "fc00:f853:ccd:e793::2/128", "fe80::/10"),
			},
		},
		"a node not yet Ready without a range is skipped, its address refused": {
			c: Cluster{Nodes: nodes(
				utiltesting.MakeNode("a").PodCIDRs("10.244.0.0/24").InternalIP("172.18.0.2"),
				utiltesting.MakeNode("new").NotReady().InternalIP("172.18.0.4"),
			)},
			want: Networks{
				Pods: prefixes("10.244.0.0/24"), Source: "the nodes' spec.podCIDRs",
				Denied: prefixes("169.254.0.0/16", "172.18.0.2/32", "172.18.0.4/32", "fe80::/10"),
			},
		},
		"the configured range wins over the nodes', denied ranges added": {
			cfg: Config{PodCIDRs: prefixes("192.168.0.0/16"), DeniedCIDRs: prefixes("fd00:ec2::254/128", "172.18.0.0/16")},
			c:   Cluster{Nodes: kind, Workers: []corev1.Pod{worker("w-0", "192.168.4.4")}},
			want: Networks{
				Pods: prefixes("192.168.0.0/16"), Source: "the operator's --pod-cidrs",
				Denied: prefixes("169.254.0.0/16", "172.18.0.0/16", "fd00:ec2::254/128", "fe80::/10"),
			},
		},
		"no node at all": {
			wantErr: "no node has spec.podCIDRs yet (0 nodes)",
		},
		"a Ready node without a range: the plugin allocates itself": {
			c: Cluster{Nodes: nodes(
				utiltesting.MakeNode("a").PodCIDRs("10.244.0.0/24"),
				utiltesting.MakeNode("b").InternalIP("172.18.0.4"),
			)},
			wantErr: "node b is Ready but has no spec.podCIDRs",
		},
		"a worker outside the nodes' ranges: the plugin has pools of its own": {
			c:       Cluster{Nodes: kind, Workers: []corev1.Pod{worker("w-0", "10.244.0.3"), worker("w-1", "192.168.7.1")}},
			wantErr: "worker pod w-1 has address 192.168.7.1, outside the pod network 10.244.0.0/23",
		},
		"a worker's IPv6 address outside IPv4-only ranges": {
			c:       Cluster{Nodes: kind, Workers: []corev1.Pod{worker("w-0", "10.244.0.3", "fd00::3")}},
			wantErr: "worker pod w-0 has address fd00::3",
		},
		"a node address that is no IP cannot be refused": {
			c:       Cluster{Nodes: nodes(utiltesting.MakeNode("a").PodCIDRs("10.244.0.0/24").InternalIP("node-a.internal"))},
			wantErr: `node a has InternalIP "node-a.internal": not an IP address`,
		},
		"a node range that is no CIDR": {
			c:       Cluster{Nodes: nodes(utiltesting.MakeNode("a").PodCIDRs("10.244.0.0"))},
			wantErr: `node a has spec.podCIDRs "10.244.0.0"`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := Discover(tc.cfg, tc.c)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Discover: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Discover: %v, want an error with %q", err, tc.wantErr)
			case tc.wantErr != "":
				if strings.Contains(err.Error(), "the pod network is unknown") && !strings.Contains(err.Error(), setPodCIDRs) {
					t.Errorf("error %q does not say what to set", err)
				}
				return
			}
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
				cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })); diff != "" {
				t.Errorf("Discover (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAPIServerEndpoints(t *testing.T) {
	notReady := apiServer(discoveryv1.AddressTypeIPv4, "172.18.0.9")
	notReady.Endpoints[0].Conditions.Ready = ptr.To(false)
	got := apiServerEndpoints([]discoveryv1.EndpointSlice{
		apiServer(discoveryv1.AddressTypeIPv4, "172.18.0.4", "172.18.0.3"),
		apiServer(discoveryv1.AddressTypeIPv6, "fc00::3"),
		apiServer(discoveryv1.AddressTypeFQDN, "api.example.com"),
		notReady,
		apiServer(discoveryv1.AddressTypeIPv4, "172.18.0.3"),
	})
	want := []netip.AddrPort{
		netip.MustParseAddrPort("172.18.0.3:6443"), netip.MustParseAddrPort("172.18.0.4:6443"), netip.MustParseAddrPort("[fc00::3]:6443"),
	}
	if !cmp.Equal(got, want, cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })) {
		t.Errorf("endpoints %v, want %v", got, want)
	}
}

func TestMerge(t *testing.T) {
	for name, tc := range map[string]struct{ in, want []string }{
		"none":                   {},
		"halves make the whole":  {in: []string{"10.244.1.0/24", "10.244.0.0/24"}, want: []string{"10.244.0.0/23"}},
		"quarters, in two steps": {in: []string{"10.0.3.0/24", "10.0.1.0/24", "10.0.2.0/24", "10.0.0.0/24"}, want: []string{"10.0.0.0/22"}},
		"not halves of one":      {in: []string{"10.244.1.0/24", "10.244.2.0/24"}, want: []string{"10.244.1.0/24", "10.244.2.0/24"}},
		"inside another":         {in: []string{"10.244.3.0/24", "10.0.0.0/8", "10.0.0.0/8"}, want: []string{"10.0.0.0/8"}},
		"host bits dropped":      {in: []string{"10.244.1.7/24"}, want: []string{"10.244.1.0/24"}},
		"IPv4 first, then IPv6":  {in: []string{"fe80::/10", "169.254.0.0/16", "::ffff:10.0.0.0/104"}, want: []string{"10.0.0.0/8", "169.254.0.0/16", "fe80::/10"}},
		"addresses of one /31":   {in: []string{"172.18.0.3/32", "172.18.0.2/32", "172.18.0.4/32"}, want: []string{"172.18.0.2/31", "172.18.0.4/32"}},
		"the whole of a family":  {in: []string{"0.0.0.0/1", "128.0.0.0/1"}, want: []string{"0.0.0.0/0"}},
	} {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, p := range Merge(prefixes(tc.in...)) {
				got = append(got, p.String())
			}
			if !cmp.Equal(got, tc.want) {
				t.Errorf("Merge(%v) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

func TestParseCIDRs(t *testing.T) {
	got, err := ParseCIDRs(" 10.244.0.0/16, fd00::/48,")
	if err != nil || !cmp.Equal(got, prefixes("10.244.0.0/16", "fd00::/48"), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })) {
		t.Errorf("ParseCIDRs: %v, %v", got, err)
	}
	if got, err := ParseCIDRs(""); err != nil || len(got) != 0 {
		t.Errorf("ParseCIDRs of nothing: %v, %v", got, err)
	}
	for _, bad := range []string{"10.244.0.0", "10.244.0.1/16", "pods"} {
		if _, err := ParseCIDRs(bad); err == nil {
			t.Errorf("ParseCIDRs(%q): no error", bad)
		}
	}
}
