package netpolicy

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func baseline() *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "shelljob-workers", Namespace: "sj-workers", UID: types.UID("u1"),
			Labels: map[string]string{"app.kubernetes.io/managed-by": "Helm", "helm.sh/chart": "shelljob-0.1.0", "app.kubernetes.io/instance": "shelljob"}},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "shell.shelljob.dev/pool", Operator: metav1.LabelSelectorOpExists}}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	}
}

var kindNetworks = Networks{
	Pods: prefixes("10.244.0.0/23"), Source: "the nodes' spec.podCIDRs",
	Denied:    prefixes("169.254.0.0/16", "172.18.0.2/31", "fe80::/10"),
	APIServer: []netip.AddrPort{netip.MustParseAddrPort("172.18.0.3:6443")},
}

// TestOutsideMeta: the operator's policy selects the baseline's pods, is
// owned by it (and goes with it), and is labelled as the operator's.
func TestOutsideMeta(t *testing.T) {
	base := baseline()
	for _, p := range []*networkingv1.NetworkPolicy{WorkersOutside(base, kindNetworks, nil), ReleaseOutside(base, kindNetworks, nil)} {
		if p.Name != "shelljob-workers-outside" || p.Namespace != base.Namespace {
			t.Errorf("name %s/%s", p.Namespace, p.Name)
		}
		if diff := cmp.Diff(base.Spec.PodSelector, p.Spec.PodSelector); diff != "" {
			t.Errorf("podSelector (-base +got):\n%s", diff)
		}
		if len(p.OwnerReferences) != 1 || p.OwnerReferences[0].UID != base.UID || p.OwnerReferences[0].Kind != "NetworkPolicy" {
			t.Errorf("owners %+v", p.OwnerReferences)
		}
		want := map[string]string{"app.kubernetes.io/managed-by": ManagedBy, "app.kubernetes.io/instance": "shelljob"}
		if !cmp.Equal(p.Labels, want) {
			t.Errorf("labels %v, want %v", p.Labels, want)
		}
		if got := p.Annotations[AnnotationPodNetwork]; got != "10.244.0.0/23 (the nodes' spec.podCIDRs)" {
			t.Errorf("annotation %q", got)
		}
	}
	if base.Labels["app.kubernetes.io/managed-by"] != "Helm" {
		t.Errorf("the baseline's labels were changed: %v", base.Labels)
	}
}

func TestWorkersOutside(t *testing.T) {
	p := WorkersOutside(baseline(), kindNetworks, nil)
	if !cmp.Equal(p.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}) || len(p.Spec.Ingress) != 0 {
		t.Errorf("types %v, ingress %v: want egress alone", p.Spec.PolicyTypes, p.Spec.Ingress)
	}
	if len(p.Spec.Egress) != 2 {
		t.Fatalf("%d egress rules, want everywhere-but and the API server: %+v", len(p.Spec.Egress), p.Spec.Egress)
	}
	everywhere := p.Spec.Egress[0]
	if len(everywhere.Ports) != 0 || len(everywhere.To) != 2 {
		t.Fatalf("first rule %+v, want two ipBlocks on every port", everywhere)
	}
	if b := everywhere.To[0].IPBlock; b.CIDR != "0.0.0.0/0" || !cmp.Equal(b.Except, []string{"10.244.0.0/23", "169.254.0.0/16", "172.18.0.2/31"}) {
		t.Errorf("IPv4 block %+v", b)
	}
	if b := everywhere.To[1].IPBlock; b.CIDR != "::/0" || !cmp.Equal(b.Except, []string{"fe80::/10"}) {
		t.Errorf("IPv6 block %+v", b)
	}
	api := p.Spec.Egress[1]
	if len(api.To) != 1 || api.To[0].IPBlock.CIDR != "172.18.0.3/32" || len(api.Ports) != 1 || api.Ports[0].Port.IntValue() != 6443 {
		t.Errorf("API server rule %+v", api)
	}
}

func TestReleaseOutside(t *testing.T) {
	p := ReleaseOutside(baseline(), kindNetworks, nil)
	if !cmp.Equal(p.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) || len(p.Spec.Egress) != 0 {
		t.Errorf("types %v, egress %v: want ingress alone", p.Spec.PolicyTypes, p.Spec.Egress)
	}
	// The nodes come in (the API server's pod proxy, the kubelets): only
	// the pod network is excepted.
	if len(p.Spec.Ingress) != 1 || len(p.Spec.Ingress[0].From) != 2 ||
		!cmp.Equal(p.Spec.Ingress[0].From[0].IPBlock.Except, []string{"10.244.0.0/23"}) || p.Spec.Ingress[0].From[1].IPBlock.Except != nil {
		t.Errorf("ingress %+v", p.Spec.Ingress)
	}
}

// TestOutsideFailsClosed: with the pod network unknown, both policies admit
// nothing and say why.
func TestOutsideFailsClosed(t *testing.T) {
	why := errors.New("node b is Ready but has no spec.podCIDRs")
	for _, p := range []*networkingv1.NetworkPolicy{WorkersOutside(baseline(), Networks{}, why), ReleaseOutside(baseline(), Networks{}, why)} {
		if len(p.Spec.Egress) != 0 || len(p.Spec.Ingress) != 0 || len(p.Spec.PolicyTypes) != 1 {
			t.Errorf("%v: rules %+v %+v, want none", p.Spec.PolicyTypes, p.Spec.Ingress, p.Spec.Egress)
		}
		if got := p.Annotations[AnnotationPodNetwork]; !strings.HasPrefix(got, "unknown, so this policy admits nothing: ") || !strings.HasSuffix(got, why.Error()) {
			t.Errorf("annotation %q", got)
		}
	}
}

// TestEverywhereButWholeFamily: an except covering a whole family drops
// its block instead of writing one the API server refuses.
func TestEverywhereButWholeFamily(t *testing.T) {
	peers := everywhereBut(prefixes("0.0.0.0/0", "fe80::/10"))
	if len(peers) != 1 || peers[0].IPBlock.CIDR != "::/0" {
		t.Errorf("peers %+v, want the IPv6 block alone", peers)
	}
}
