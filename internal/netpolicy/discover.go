package netpolicy

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// LinkLocal are the ranges refused to the workers whatever the values say:
// IPv4's and IPv6's link-local, where the clouds serve their metadata and
// the node's credentials (169.254.169.254), and node-local services listen.
var LinkLocal = []netip.Prefix{netip.MustParsePrefix("169.254.0.0/16"), netip.MustParsePrefix("fe80::/10")}

// setPodCIDRs is how a message tells the admin to name the pod network.
const setPodCIDRs = "set it: the chart's workers.networkPolicy.podCIDRs, the operator's --pod-cidrs"

// Config is what the operator is told of the network (its flags, from the
// chart's values).
type Config struct {
	// PodCIDRs, when set, are the pod network, whatever the nodes say: for
	// a network plugin that allocates pod addresses itself (IP pools of its
	// own, addresses of the cloud's network), where the nodes'
	// spec.podCIDRs are unset or not what the pods get. Defaults to the
	// nodes' spec.podCIDRs.
	PodCIDRs []netip.Prefix
	// DeniedCIDRs are refused to the workers beside LinkLocal and the
	// nodes' addresses: a metadata service elsewhere, the nodes' subnet.
	DeniedCIDRs []netip.Prefix
}

// Cluster is what Discover reads of the cluster.
type Cluster struct {
	Nodes []corev1.Node
	// Workers are the worker pods.
	Workers []corev1.Pod
	// APIServer are the EndpointSlices of the default/kubernetes Service.
	APIServer []discoveryv1.EndpointSlice
}

// Networks is what Discover found.
type Networks struct {
	// Pods is the pod network, merged.
	Pods []netip.Prefix
	// Source says where Pods came from.
	Source string
	// Denied are refused to the workers: LinkLocal, the nodes' addresses
	// and Config.DeniedCIDRs, merged.
	Denied []netip.Prefix
	// APIServer are the API server's ready endpoints, sorted.
	APIServer []netip.AddrPort
}

// Discover finds the pod network, the addresses refused to the workers and
// the API server's endpoints. It fails when the pod network is unknown,
// saying why; the policies then admit nothing.
func Discover(cfg Config, c Cluster) (Networks, error) {
	var n Networks
	if len(cfg.PodCIDRs) > 0 {
		n.Pods, n.Source = Merge(cfg.PodCIDRs), "the operator's --pod-cidrs"
	} else {
		pods, err := nodePodCIDRs(c.Nodes)
		if err != nil {
			return Networks{}, err
		}
		n.Pods, n.Source = pods, "the nodes' spec.podCIDRs"
	}
	for _, p := range c.Workers {
		for _, ip := range p.Status.PodIPs {
			addr, err := netip.ParseAddr(ip.IP)
			if err != nil {
				return Networks{}, fmt.Errorf("worker pod %s has address %q: not an IP address", p.Name, ip.IP)
			}
			if !contains(n.Pods, addr) {
				return Networks{}, fmt.Errorf("worker pod %s has address %s, outside the pod network %s (from %s), "+
					"so the network plugin gives pods other addresses: the pod network is unknown; %s",
					p.Name, addr, join(n.Pods), n.Source, setPodCIDRs)
			}
		}
	}
	denied := slices.Concat(LinkLocal, cfg.DeniedCIDRs)
	for _, node := range c.Nodes {
		addrs, err := nodeAddresses(&node)
		if err != nil {
			return Networks{}, err
		}
		for _, a := range addrs {
			denied = append(denied, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	n.Denied = Merge(denied)
	n.APIServer = apiServerEndpoints(c.APIServer)
	return n, nil
}

// nodePodCIDRs is the union of the nodes' pod CIDRs, or why it is not the
// pod network.
func nodePodCIDRs(nodes []corev1.Node) ([]netip.Prefix, error) {
	var all []netip.Prefix
	for _, node := range nodes {
		cidrs := node.Spec.PodCIDRs
		if len(cidrs) == 0 && node.Spec.PodCIDR != "" {
			cidrs = []string{node.Spec.PodCIDR}
		}
		if len(cidrs) == 0 && ready(&node) {
			return nil, fmt.Errorf("node %s is Ready but has no spec.podCIDRs, so the network plugin allocates pod addresses itself: "+
				"the pod network is unknown; %s", node.Name, setPodCIDRs)
		}
		for _, s := range cidrs {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				return nil, fmt.Errorf("node %s has spec.podCIDRs %q: %w", node.Name, s, err)
			}
			all = append(all, p)
		}
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("no node has spec.podCIDRs yet (%d nodes): the pod network is unknown; %s", len(nodes), setPodCIDRs)
	}
	return Merge(all), nil
}

func ready(node *corev1.Node) bool {
	i := slices.IndexFunc(node.Status.Conditions, func(c corev1.NodeCondition) bool { return c.Type == corev1.NodeReady })
	return i >= 0 && node.Status.Conditions[i].Status == corev1.ConditionTrue
}

// nodeAddresses are a node's IP addresses. One that does not parse fails:
// a node address that cannot be refused must not be let through.
func nodeAddresses(node *corev1.Node) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, a := range node.Status.Addresses {
		if a.Type != corev1.NodeInternalIP && a.Type != corev1.NodeExternalIP {
			continue
		}
		addr, err := netip.ParseAddr(a.Address)
		if err != nil {
			return nil, fmt.Errorf("node %s has %s %q: not an IP address, so it cannot be refused to the workers", node.Name, a.Type, a.Address)
		}
		out = append(out, addr.Unmap())
	}
	return out, nil
}

// apiServerEndpoints are the ready IP endpoints of the slices, on their TCP
// ports.
func apiServerEndpoints(eps []discoveryv1.EndpointSlice) []netip.AddrPort {
	var out []netip.AddrPort
	for _, s := range eps {
		if s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6 {
			continue
		}
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			for _, a := range e.Addresses {
				addr, err := netip.ParseAddr(a)
				if err != nil {
					continue
				}
				for _, p := range s.Ports {
					if p.Port == nil || (p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP) {
						continue
					}
					out = append(out, netip.AddrPortFrom(addr.Unmap(), uint16(*p.Port)))
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b netip.AddrPort) int { return a.Compare(b) })
	return slices.Compact(out)
}

func contains(prefixes []netip.Prefix, addr netip.Addr) bool {
	addr = addr.Unmap()
	return slices.ContainsFunc(prefixes, func(p netip.Prefix) bool { return p.Contains(addr) })
}

func join(prefixes []netip.Prefix) string {
	s := make([]string, len(prefixes))
	for i, p := range prefixes {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}
