// Package kubetest holds the tests of kubectl-shelljob against a real API
// server (envtest): the origin policy of config/policy, the commands that
// only read and patch ShellJobs and ShellPools, and exec's files and
// delivery marks with the real operator and agents (clustertest), reached
// in place of pod exec.
package kubetest
