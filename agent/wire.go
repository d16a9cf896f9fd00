package agent

import (
	"errors"

	"shelljob.dev/shelljob/internal/agentapi"
)

// The socket protocol between the subcommands and the daemon. A client
// sends one request line (JSON); the daemon answers one reply line (JSON),
// then the stream of the operation:
//
//	start, signal, delivered, hangup  nothing more
//	events         Event JSON lines, until either side closes
//	follow         the framed follow stream (agentapi.FollowMagic), with
//	               its keepalives, until its e frame; the reply to an
//	               AwaitStart follow comes at once, before the start
//	get-files      a tar stream, then EOF
//	attach         the framed follow stream of the console's output from
//	               its start, until its e frame, then the line "x CODE":
//	               the exit status of its command; the reply comes once
//	               the console has started. The client sends its input
//	               frames (console.go) after the request line. An attach
//	               with a session is the process that connected: a hangup
//	               of its session kills it (the attach subcommand alone
//	               names one).
//
// put-files sends its tar stream after the request line and half-closes;
// the reply comes after it. A client that closes its side of an events or
// follow stream ends it. Both ends are the same binary, so the socket
// protocol needs no version of its own.

// maxRequestBytes bounds a request line. A command at the API's limit,
// 65,536 characters, takes at most 384 KiB JSON-escaped (\u00XX, six
// bytes a character).
const maxRequestBytes = 1 << 20

type request struct {
	Op     string                 `json:"op"`
	Job    string                 `json:"job,omitempty"`
	Start  *agentapi.StartRequest `json:"start,omitempty"`
	Signal agentapi.Signal        `json:"signal,omitempty"`
	Offset int64                  `json:"offset,omitempty"`
	// Session names an attach, and the attach a hangup ends.
	Session string `json:"session,omitempty"`
	// Exit asks a follow for the job's exit frame (agentapi.ControlRequest.Exit).
	Exit bool `json:"exit,omitempty"`
}

type reply struct {
	Error string `json:"error,omitempty"`
	// Code is the subcommand's exit code for Error (agentapi.Exit…).
	Code   int                      `json:"code,omitempty"`
	Start  *agentapi.StartResponse  `json:"start,omitempty"`
	Signal *agentapi.SignalResponse `json:"signal,omitempty"`
}

// Error is an error the daemon answered.
type Error struct {
	Msg string
	// Code is the subcommand's exit code for it.
	Code int
}

func (e *Error) Error() string { return e.Msg }

// Unwrap gives the agentapi error for Code, such as agentapi.ErrUnknownJob.
func (e *Error) Unwrap() error { return agentapi.ExitError(e.Code) }

// ExitCode is the subcommand's exit code for err.
func ExitCode(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, agentapi.ErrUnknownJob):
		return agentapi.ExitUnknownJob
	case errors.Is(err, agentapi.ErrBusy):
		return agentapi.ExitBusy
	case errors.Is(err, agentapi.ErrStarted):
		return agentapi.ExitStarted
	case errors.Is(err, agentapi.ErrProtocol):
		return agentapi.ExitProtocol
	case errors.Is(err, agentapi.ErrUsage):
		return agentapi.ExitUsage
	case errors.Is(err, agentapi.ErrAttached):
		return agentapi.ExitAttached
	}
	return 1
}

// errorReply is the reply of err; an empty one for nil.
func errorReply(err error) reply {
	if err == nil {
		return reply{}
	}
	return reply{Error: err.Error(), Code: ExitCode(err)}
}
