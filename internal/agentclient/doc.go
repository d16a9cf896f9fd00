// Package agentclient is agentapi.Client over pod exec: each call execs a
// subcommand of the agent (agentapi.AgentPath) in the worker pod through
// the Kubernetes API, with client-go's remotecommand over WebSocket,
// falling back to SPDY where the API server cannot upgrade to WebSocket.
//
// Requests go on the exec's stdin or in its arguments, answers come on its
// stdout; the agent's exit code and its one-line stderr become the error,
// which names the pod and wraps agentapi's errors (ErrUnknownJob, ErrBusy,
// ErrStarted, ErrProtocol) for errors.Is.
//
// Attach, beside agentapi.Client, runs the agent's attach subcommand with
// a TTY: the terminal of a Console job, for the server of the API's attach
// subresource, which alone execs into workers.
//
// A follow, put-files or get-files exec that moves no byte for
// Options.StreamIdle while it waits on the agent is cut, with
// agentapi.ErrStreamIdle: a hung worker or a stalled connection ends the
// call instead of holding it forever. The agent's follow keepalives keep
// a silent command's follow moving.
package agentclient
