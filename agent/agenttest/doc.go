// Package agenttest runs shelljob-agent daemons for tests: the test binary,
// started again with an environment variable set, is the agent. The daemon
// reaps every child of its process, so it runs in a process of its own,
// apart from the tests.
//
// A package that uses it makes Main its TestMain.
package agenttest
