package agentapi

import (
	"context"
	"io"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Fixed paths in worker pods.
const (
	// AgentPath is the agent binary, PID 1 of every worker.
	AgentPath = "/usr/local/bin/shelljob-agent"
	// SpoolDir is the emptyDir that holds each job's spool, exit status and
	// $SHELLJOB_OUT directory. It outlives restarts of every reader.
	SpoolDir = "/var/lib/shelljob"
)

// StartRequest asks the agent to run a command.
type StartRequest struct {
	// Job is the ShellJob's UID: the key of its spool. Starting the same
	// job twice returns the first start's answer and runs nothing.
	Job string `json:"job"`
	// Command is the shell code.
	Command string `json:"command"`
	// Stateful feeds Command to the worker's persistent shell; otherwise it
	// runs as `SHELL -c COMMAND` in a new session.
	Stateful bool `json:"stateful,omitempty"`
	// Shell is the shell to run, such as zsh.
	Shell string `json:"shell"`
}

// StartResponse says how a command started.
type StartResponse struct {
	PGID      int       `json:"pgid"`
	StartedAt time.Time `json:"startedAt"`
}

// SignalResponse says what a signal found.
type SignalResponse struct {
	// GroupEmpty is true when the process group had no process left.
	GroupEmpty bool `json:"groupEmpty"`
}

// EventType names a job event.
type EventType string

const (
	// EventStarted: the command started.
	EventStarted EventType = "started"
	// EventExited: the command's output is closed and its exit status known;
	// the job has ended.
	EventExited EventType = "exited"
	// EventStatus: a periodic report of a running job's output counters.
	EventStatus EventType = "status"
)

// Event is one line of the agent's event stream.
type Event struct {
	Type EventType `json:"type"`
	Job  string    `json:"job"`
	Time time.Time `json:"time"`
	PGID int       `json:"pgid,omitempty"`
	// ExitCode is set on EventExited, as a shell reports it (128+N after signal N).
	ExitCode *int `json:"exitCode,omitempty"`
	// OutputBytes and DroppedBytes count written and not kept bytes.
	OutputBytes  int64 `json:"outputBytes,omitempty"`
	DroppedBytes int64 `json:"droppedBytes,omitempty"`
	// LastOutput is when the command last wrote, for idle timeouts.
	LastOutput *time.Time `json:"lastOutput,omitempty"`
}

// Client reaches the agent of a worker pod. The operator, the bot and the
// CLI use the exec implementation in internal/agentclient; tests may use an
// in-process one.
type Client interface {
	// Start runs a command. It is idempotent per job.
	Start(ctx context.Context, pod types.NamespacedName, req StartRequest) (StartResponse, error)
	// Signal sends sig to the job's process group.
	Signal(ctx context.Context, pod types.NamespacedName, job string, sig Signal) (SignalResponse, error)
	// Events streams the events of every job of the pod, starting with the
	// state of each known job, until ctx ends or the stream breaks.
	Events(ctx context.Context, pod types.NamespacedName, handle func(Event)) error
	// Follow copies the job's output from byte offset to w, and returns when
	// the output is closed (the job ended) with the offset reached.
	Follow(ctx context.Context, pod types.NamespacedName, job string, offset int64, w io.Writer) (int64, error)
	// PutFiles unpacks a tar stream into the job's $SHELLJOB_OUT directory,
	// before the job starts: the command's inputs.
	PutFiles(ctx context.Context, pod types.NamespacedName, job string, tar io.Reader) error
	// GetFiles writes the job's $SHELLJOB_OUT directory as a tar stream.
	GetFiles(ctx context.Context, pod types.NamespacedName, job string, w io.Writer) error
}

// Signal is a signal the agent sends to a process group.
type Signal string

const (
	SIGINT  Signal = "INT"
	SIGTERM Signal = "TERM"
	SIGKILL Signal = "KILL"
)
