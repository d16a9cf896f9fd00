//go:build e2e

// Package e2e runs the operator end to end on the kind cluster: real worker
// pods, real exec into their agents, real signals. hack/e2e.sh brings the
// cluster up (make kind-up), deploys the operator with its image loaded
// (make deploy) and runs these tests with the e2e build tag.
package e2e
