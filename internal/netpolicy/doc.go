// Package netpolicy decides the addresses in the NetworkPolicies that keep
// shelljob's worker pods away from what they must not reach: which ranges
// are the pod network, which addresses are the nodes', and which ranges
// stay refused whatever the values say (link-local: the clouds' metadata
// services). It is pure: Discover takes the cluster's Nodes, the worker
// pods and the API server's EndpointSlices, and WorkersOutside and
// ReleaseOutside build the policies from its answer. The operator's
// NetworkPolicy reconciler (controllers/) reads those objects from its
// cache and writes the policies.
//
// The chart installs two baseline policies that name no address: the
// workers' (no ingress; egress to DNS and, with egress "all", to the pods
// of the other namespaces) and the release namespace's (the operator and
// the bot admit the pods of every namespace but the workers'). Policies
// only add to each other, so the operator's policies beside them
// (OutsideName) can only admit more: the addresses outside the pod
// network. When the pod network cannot be known, they admit nothing, and
// both fail closed, with the reason in their AnnotationPodNetwork.
//
// The rules:
//   - The pod network is Config.PodCIDRs when set, else every node's
//     spec.podCIDRs. A Ready node without any means the network plugin
//     allocates pod addresses itself: the pod network is unknown. A node
//     not yet Ready without any is one that has not had its range yet,
//     and runs no pod.
//   - Every worker pod's address must lie in the pod network; one that
//     does not means the pod network is not what the nodes say (a plugin
//     with IP pools of its own): unknown.
//   - Workers may reach every address outside the pod network but the
//     link-local ranges, the nodes' InternalIP and ExternalIP addresses
//     and Config.DeniedCIDRs; and the API server's endpoints on their own
//     ports, node addresses or not, as they could before the nodes were
//     refused (a pool that runs as a ServiceAccount needs it).
//   - The operator and the bot admit every address outside the pod
//     network: the nodes (the API server's pod proxy, the kubelets) and
//     the world.
package netpolicy
