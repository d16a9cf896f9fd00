// Package chart tests the Helm chart charts/shelljob: helm template against
// golden files under testdata/ (go test ./test/chart -update rewrites them),
// properties of the rendered manifests (restricted pods, exec only in the
// workers namespace, no ClusterRole on pods/exec or secrets), the values
// schema, the CRDs against config/crd/bases, their names and category,
// config/policy against the chart's admission policies (-update writes
// it), and, on envtest's API server, the RBAC as the bot and the operator
// meet it, and who may do what (TestAccess): every admission policy and
// every right on a pool, through the API server's real authentication,
// impersonation, RBAC and admission, as CLI users and as the bot's
// ServiceAccount acting for chat admins.
//
// helm comes from $HELM, else bin/helm; `make unit` builds it and sets both
// HELM and KUBEBUILDER_ASSETS. Without them the tests skip, except on CI
// (CI=true), where they fail.
package chart
