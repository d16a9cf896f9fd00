package testing

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeWrapper builds a Node.
type NodeWrapper struct{ corev1.Node }

// MakeNode returns a Ready node with no pod CIDR and no address.
func MakeNode(name string) *NodeWrapper {
	return &NodeWrapper{corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue},
		}},
	}}
}

// Obj returns the built node.
func (w *NodeWrapper) Obj() *corev1.Node { return &w.Node }

// PodCIDRs sets spec.podCIDRs, and spec.podCIDR to the first, as the
// controller manager does.
func (w *NodeWrapper) PodCIDRs(cidrs ...string) *NodeWrapper {
	w.Spec.PodCIDRs = cidrs
	w.Spec.PodCIDR = ""
	if len(cidrs) > 0 {
		w.Spec.PodCIDR = cidrs[0]
	}
	return w
}

// Address adds a status address of the type.
func (w *NodeWrapper) Address(t corev1.NodeAddressType, addr string) *NodeWrapper {
	w.Status.Addresses = append(w.Status.Addresses, corev1.NodeAddress{Type: t, Address: addr})
	return w
}

// InternalIP adds an InternalIP address.
func (w *NodeWrapper) InternalIP(addr string) *NodeWrapper {
	return w.Address(corev1.NodeInternalIP, addr)
}

// NotReady makes the node's Ready condition False.
func (w *NodeWrapper) NotReady() *NodeWrapper {
	w.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}
	return w
}
