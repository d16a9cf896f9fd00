// Package agentapi is the contract between the in-pod agent (cmd/agent,
// PID 1 of every worker pod) and its callers: the operator, the bot and the
// CLI. Callers reach the agent by exec-ing AgentPath in the worker pod with
// one of the subcommands below; the exec's stdin and stdout carry the
// request and the answer.
package agentapi
