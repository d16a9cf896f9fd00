// Package testenv starts a real kube-apiserver and etcd (envtest) with the
// project's CRDs installed, for tests of the API and of the reconcilers.
//
// The binaries are built from source by hack/envtest-assets.sh; `make unit`
// points KUBEBUILDER_ASSETS at them.
package testenv
