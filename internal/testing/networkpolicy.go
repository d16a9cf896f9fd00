package testing

import networkingv1 "k8s.io/api/networking/v1"

// IPBlocks are the except lists of a NetworkPolicy's ipBlock peers, by
// CIDR, its ingress and egress rules together.
func IPBlocks(p *networkingv1.NetworkPolicy) map[string][]string {
	out := map[string][]string{}
	var peers []networkingv1.NetworkPolicyPeer
	for _, r := range p.Spec.Egress {
		peers = append(peers, r.To...)
	}
	for _, r := range p.Spec.Ingress {
		peers = append(peers, r.From...)
	}
	for _, peer := range peers {
		if b := peer.IPBlock; b != nil {
			out[b.CIDR] = append(out[b.CIDR], b.Except...)
		}
	}
	return out
}
