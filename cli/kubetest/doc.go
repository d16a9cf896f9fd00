// Package kubetest holds the tests of kubectl-shelljob against a real API
// server (envtest): the origin policy of config/policy and the commands
// that only read and patch ShellJobs and ShellPools.
package kubetest
