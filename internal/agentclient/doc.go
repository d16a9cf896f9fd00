// Package agentclient is agentapi.Client over pod exec: each call execs a
// subcommand of the agent (agentapi.AgentPath) in the worker pod through
// the Kubernetes API, with client-go's remotecommand over WebSocket,
// falling back to SPDY where the API server cannot upgrade to WebSocket.
//
// Requests go on the exec's stdin or in its arguments, answers come on its
// stdout; the agent's exit code and its one-line stderr become the error,
// which names the pod and wraps agentapi's errors (ErrUnknownJob, ErrBusy,
// ErrStarted, ErrProtocol) for errors.Is.
package agentclient
