// Package chart tests the Helm chart charts/shelljob: helm template against
// golden files under testdata/ (go test ./test/chart -update rewrites them),
// properties of the rendered manifests (restricted pods, exec only in the
// workers namespace, no ClusterRole on pods/exec or secrets), the values
// schema, the CRDs against config/crd/bases, their names and category,
// and, on envtest's API server, the RBAC and the admission policy as the
// bot and the operator meet them.
//
// helm comes from $HELM, else bin/helm; `make unit` builds it and sets both
// HELM and KUBEBUILDER_ASSETS. Without them the tests skip, except on CI
// (CI=true), where they fail.
package chart
