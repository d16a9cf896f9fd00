// Package kubetest holds the tests of kubectl-shelljob against a real API
// server (envtest): the origin policy of config/policy, the commands that
// only read and patch ShellJobs and ShellPools, and exec's files, delivery
// marks and consoles with the real operator and agents (clustertest),
// whose stream API they reach through its front (clustertest.StreamFront),
// and, for the consoles' attach, the API server's pods/exec of a stand-in
// kubelet (streamapitest.Kubelet).
package kubetest
