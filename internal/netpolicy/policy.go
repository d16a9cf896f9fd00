package netpolicy

import (
	"maps"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// AnnotationPodNetwork, on the operator's policies, says which pod network
// they were built for and where it came from, or why it is unknown and
// the policy admits nothing.
const AnnotationPodNetwork = "shell.shelljob.dev/pod-network"

// ManagedBy is the app.kubernetes.io/managed-by label of the operator's
// policies.
const ManagedBy = "shelljob-operator"

// OutsideName is the name of the operator's policy beside the baseline
// policy named baseline.
func OutsideName(baseline string) string { return baseline + "-outside" }

// WorkersOutside is the policy beside the workers' baseline: their egress
// to every address outside the pod network but n.Denied, and to the API
// server's endpoints on their ports. With err (Discover's) set, it admits
// nothing and its annotation says why.
func WorkersOutside(base *networkingv1.NetworkPolicy, n Networks, err error) *networkingv1.NetworkPolicy {
	p := outside(base, networkingv1.PolicyTypeEgress, n, err)
	if err != nil {
		return p
	}
	p.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{To: everywhereBut(Merge(slices.Concat(n.Denied, n.Pods)))}}
	for _, e := range n.APIServer {
		a := e.Addr()
		p.Spec.Egress = append(p.Spec.Egress, networkingv1.NetworkPolicyEgressRule{
			To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: netip.PrefixFrom(a, a.BitLen()).String()}}},
			Ports: []networkingv1.NetworkPolicyPort{{
				Protocol: ptr.To(corev1.ProtocolTCP),
				Port:     ptr.To(intstr.FromInt32(int32(e.Port()))),
			}},
		})
	}
	return p
}

// ReleaseOutside is the policy beside the release namespace's baseline:
// the operator and the bot admit every address outside the pod network
// (the API server's pod proxy and the kubelets come from their nodes'
// addresses). With err set, it admits nothing and its annotation says why.
func ReleaseOutside(base *networkingv1.NetworkPolicy, n Networks, err error) *networkingv1.NetworkPolicy {
	p := outside(base, networkingv1.PolicyTypeIngress, n, err)
	if err == nil {
		p.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: everywhereBut(n.Pods)}}
	}
	return p
}

// outside is the operator's policy beside base, with no rule yet: the same
// pods, base's labels but its own managed-by, owned by base so that it
// goes with it.
func outside(base *networkingv1.NetworkPolicy, t networkingv1.PolicyType, n Networks, err error) *networkingv1.NetworkPolicy {
	labels := maps.Clone(base.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	delete(labels, "helm.sh/chart")
	labels["app.kubernetes.io/managed-by"] = ManagedBy
	note := join(n.Pods) + " (" + n.Source + ")"
	if err != nil {
		note = "unknown, so this policy admits nothing: " + err.Error()
	}
	p := &networkingv1.NetworkPolicy{
		TypeMeta: metav1.TypeMeta{APIVersion: networkingv1.SchemeGroupVersion.String(), Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        OutsideName(base.Name),
			Namespace:   base.Namespace,
			Labels:      labels,
			Annotations: map[string]string{AnnotationPodNetwork: note},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: networkingv1.SchemeGroupVersion.String(),
				Kind:       "NetworkPolicy",
				Name:       base.Name,
				UID:        base.UID,
				Controller: ptr.To(true),
			}},
		},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: *base.Spec.PodSelector.DeepCopy(),
			PolicyTypes: []networkingv1.PolicyType{t},
		},
	}
	// A policy of type t with no rule admits nothing (and adds nothing to
	// base); it is not "admit everything".
	return p
}

// everywhereBut are the peers of every IPv4 and IPv6 address but except
// (merged). A family that except covers whole has no peer.
func everywhereBut(except []netip.Prefix) []networkingv1.NetworkPolicyPeer {
	var peers []networkingv1.NetworkPolicyPeer
	for _, all := range []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")} {
		block := &networkingv1.IPBlock{CIDR: all.String()}
		whole := false
		for _, p := range except {
			if p.Addr().BitLen() != all.Addr().BitLen() {
				continue
			}
			if p.Bits() == 0 {
				whole = true
			}
			block.Except = append(block.Except, p.String())
		}
		if !whole {
			peers = append(peers, networkingv1.NetworkPolicyPeer{IPBlock: block})
		}
	}
	return peers
}
