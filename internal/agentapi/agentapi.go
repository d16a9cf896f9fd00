package agentapi

import (
	"context"
	"errors"
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
	// SpoolDirEnv overrides SpoolDir for the daemon and its subcommands.
	SpoolDirEnv = "SHELLJOB_SPOOL_DIR"
	// ShellEnv names the shell of jobs whose StartRequest names none (the
	// pool's); DefaultShell when unset.
	ShellEnv = "SHELLJOB_SHELL"
	// SpoolSizeLimitEnv is the sizeLimit of the spool's emptyDir, in
	// bytes, which the operator sets in each worker pod: the agent keeps
	// the spools within a budget below it (see Event.Worker).
	SpoolSizeLimitEnv = "SHELLJOB_SPOOL_SIZE_LIMIT"
)

// The rest of the worker pod's contract, which the operator's pod template
// and every caller of the agent (the operator, the bot, the CLI) share.
const (
	// WorkerContainer is the worker pod's container that runs the agent:
	// the container of every exec into a worker.
	WorkerContainer = "agent"
	// DefaultShell runs the jobs of a pool that names no shell, as
	// ShellPool's spec.shell defaults to.
	DefaultShell = "zsh"
)

// The worker pod's readiness endpoint: the daemon, run with
// --ready-addr=:ReadyPort, answers plain HTTP GET ReadyPath with 200 while
// a request through its socket is answered (what ping checks), and 503
// otherwise. The kubelet's httpGet probe costs no exec.
const (
	ReadyPort = 8079
	ReadyPath = "/readyz"
)

// ProtocolVersion is the version of the exec protocol below. Callers pass it
// as FlagProtocol; an agent that speaks only older versions exits with
// ExitProtocol. Versions only grow: a new field in a JSON answer that
// callers rely on, or a new frame kind in the follow stream, needs a new
// version. An optional field whose absence means "not known", as
// Event.Files, does not: an older caller ignores it, and a newer one reads
// its absence as an older agent's.
//
// Version 2 added the control subcommand and follow's AwaitStart.
//
// Within version 2, later agents added the delivered subcommand (and its
// control operation), EventWorker, consoles (StartRequest.Console and the
// attach subcommand), and then the hangup subcommand (and its control
// operation) with attach's FlagSession. They need no new version: a
// caller drops an event type it does not know, and an older agent answers
// the subcommand with ExitUsage, and the operation with an error that
// wraps ErrUsage. An older agent runs a Console job's command as a Fork
// job's, without a terminal, and refuses its attach; one that has attach
// but not hangup refuses an attach with FlagSession too (no such agent
// was released).
const ProtocolVersion = 2

// Subcommands of AgentPath. Each is a thin client of the daemon (PID 1)
// that runs for one exec:
//
//	start      stdin: StartRequest as JSON; stdout: StartResponse as JSON.
//	signal     --job --signal; stdout: SignalResponse as JSON.
//	events     stdout: Event as JSON lines, until stdin closes (with
//	           --watch-stdin) or the daemon ends.
//	follow     --job --offset; stdout: the follow stream (FollowMagic and
//	           frames) with --framed, else the raw output with the
//	           not-kept lines; with --text, the final text stream
//	           (TextMagic and frames) from the start.
//	put-files  --job; stdin: a tar stream, unpacked into $SHELLJOB_OUT.
//	get-files  --job [--offset]; stdout: $SHELLJOB_OUT as a tar stream,
//	           from byte --offset of it on (an agent older than --offset
//	           answers it with a usage error). The stream of a job that
//	           has ended is the same at every read.
//	ping       exits 0 once the daemon answers, as GET ReadyPath does.
//	delivered  --job; the job's output and files were delivered to their
//	           reader: its spool may go once the worker needs the room.
//	attach     --job [--session]; run with a terminal (the exec's TTY):
//	           relays the terminal to the console of the Console job J,
//	           from its start, and its size at each SIGWINCH, until the
//	           console ends; exits with the exit status of its command. It
//	           waits up to AttachStartWait for the job to start. An attach
//	           that ends first (its stdin closed, the exec cut) hangs the
//	           console up. A second attach while one is on fails with
//	           ExitAttached. --session names the attach, for hangup.
//	hangup     --job [--session]; hangs up the console of the Console job
//	           J, as the end of its attach does, and ends that attach
//	           (its process is killed): with --session, only if the attach
//	           on the console is the one of that name. The container
//	           runtime need not tell an attach that its exec was cut (it
//	           may keep a TTY exec's stdin and terminal open), so whoever
//	           carried the exec says so. It does nothing to a console that
//	           has ended, and fails for a job that is no console.
//	control    the warm control channel: stdin: ControlRequest JSON lines;
//	           stdout: ControlMessage JSON lines, the event stream's events
//	           (none with --no-events) and the answers, until stdin closes
//	           or the daemon ends. Its first message is empty: the channel
//	           is up. More empty messages follow, every ControlKeepalive
//	           in which the daemon answered.
//
// Every subcommand takes --protocol. Errors go to stderr, one line, with
// the exit codes below.
const (
	CmdStart    = "start"
	CmdSignal   = "signal"
	CmdEvents   = "events"
	CmdFollow   = "follow"
	CmdPutFiles = "put-files"
	CmdGetFiles = "get-files"
	CmdPing     = "ping"
	CmdControl  = "control"
	CmdAttach   = "attach"
	// CmdDelivered is the delivered subcommand, and the control operation
	// of the same name (ControlRequest.Job).
	CmdDelivered = "delivered"
	// CmdHangup is the hangup subcommand, and the control operation of the
	// same name (ControlRequest.Job and Session).
	CmdHangup = "hangup"
)

// Timings of consoles.
const (
	// AttachStartWait is the longest an attach waits for its console to
	// start on the pod: a client attaches as soon as the job is placed.
	AttachStartWait = time.Minute
	// ConsoleAttachWait is how long a console waits for its attach after
	// it started: one that nobody attached to by then is hung up.
	ConsoleAttachWait = time.Minute
)

// AwaitStart, passed as follow's offset, makes it wait for the job to
// start on the pod and then follow it from 0. A reader can so open its
// follow as soon as the job is placed, while the operator starts it.
const AwaitStart int64 = -1

// JobFromStdin, passed as follow's --job, makes it read the job from the
// first line of its stdin. A reader so opens the follow's exec before it
// knows the job: the exec's setup overlaps the job's create and placement.
// A stdin closed before the line ends the follow with no output.
const JobFromStdin = "-"

// Flags of the subcommands.
const (
	FlagProtocol = "--protocol"
	FlagJob      = "--job"
	FlagSignal   = "--signal"
	FlagOffset   = "--offset"
	// FlagFramed makes follow write frames (FollowMagic first), so that a
	// caller can tell output from the not-kept lines and resume exactly.
	FlagFramed = "--framed"
	// FlagWatchStdin makes events and follow end when their stdin closes,
	// so that a subcommand whose caller went away does not linger in the pod.
	FlagWatchStdin = "--watch-stdin"
	// FlagNoEvents makes control carry answers only: a reader's channel,
	// which follows output and needs no events.
	FlagNoEvents = "--no-events"
	// FlagSession names an attach, so that a hangup of that name ends it
	// and no other: the stream API names each attach it carries. A name
	// is as a job's: letters, digits, '.', '_' and '-', at most 128.
	FlagSession = "--session"
)

// Exit codes of the subcommands, beyond 0 (done) and 1 (any other error).
const (
	ExitUsage      = 2
	ExitUnknownJob = 3
	ExitBusy       = 4
	ExitStarted    = 5
	ExitProtocol   = 6
	ExitAttached   = 7
)

// Errors a Client returns, wrapped with the pod and job; test with errors.Is.
var (
	// ErrUnknownJob: the agent knows no such job (it never started there,
	// or its spool was removed).
	ErrUnknownJob = errors.New("unknown job")
	// ErrBusy: a Stateful job was started while the persistent shell still
	// runs another one. Start it again once that job has exited.
	ErrBusy = errors.New("persistent shell busy")
	// ErrStarted: PutFiles came after the job had started.
	ErrStarted = errors.New("job already started")
	// ErrProtocol: the agent does not speak ProtocolVersion.
	ErrProtocol = errors.New("agent protocol mismatch")
	// ErrUsage: the agent did not understand the subcommand or its flags,
	// as an agent older than the subcommand answers.
	ErrUsage = errors.New("agent usage error")
	// ErrAttached: a console already has its attach; one at a time.
	ErrAttached = errors.New("console already attached")
	// ErrStreamIdle: a stream to the agent moved no byte for longer than
	// its idle limit while it waited on the agent: the worker or the
	// connection hangs, and the stream was cut.
	ErrStreamIdle = errors.New("agent stream idle")
)

// ExitError maps an exit code of a subcommand to one of the errors above,
// or nil for the codes it does not know.
func ExitError(code int) error {
	switch code {
	case ExitUsage:
		return ErrUsage
	case ExitUnknownJob:
		return ErrUnknownJob
	case ExitBusy:
		return ErrBusy
	case ExitStarted:
		return ErrStarted
	case ExitProtocol:
		return ErrProtocol
	case ExitAttached:
		return ErrAttached
	}
	return nil
}

// StartRequest asks the agent to run a command.
type StartRequest struct {
	// Job is the ShellJob's UID: the key of its spool. Starting the same
	// job twice returns the first start's answer and runs nothing.
	Job string `json:"job"`
	// Command is the shell code.
	Command string `json:"command"`
	// Stateful feeds Command to the worker's persistent shell; otherwise it
	// runs as `SHELL -c COMMAND` in a new session. Stateful needs zsh.
	Stateful bool `json:"stateful,omitempty"`
	// Console runs Command as a Fork job's, with a new pseudo-terminal for
	// its standard streams and its controlling terminal, owned by the
	// job's user: the attach subcommand reaches it. Not with Stateful.
	Console bool `json:"console,omitempty"`
	// Shell is the shell to run, such as zsh. Defaults to DefaultShell.
	Shell string `json:"shell,omitempty"`
}

// StartResponse says how a command started.
type StartResponse struct {
	// PGID is the command's process group. For a Stateful job it is the
	// persistent shell's group, which outlives the job.
	PGID      int       `json:"pgid"`
	StartedAt time.Time `json:"startedAt"`
}

// SignalResponse says what a signal found.
type SignalResponse struct {
	// GroupEmpty is true when the process group had no process left, either
	// before the signal (nothing was sent) or within a moment after it. A
	// job that has exited always answers true. For a Stateful job the
	// persistent shell itself does not count.
	GroupEmpty bool `json:"groupEmpty"`
}

// A SentSignal is a signal the agent sent to a job's group when asked
// (Signal), as the exit event tells them: an operator that died between a
// signal and its record learns from them that its job was stopped.
type SentSignal struct {
	Signal Signal    `json:"signal"`
	Time   time.Time `json:"time"`
}

// EventType names a job event.
type EventType string

const (
	// EventStarted: the command started. Time is its start time.
	EventStarted EventType = "started"
	// EventExited: the command's output is closed and its exit status known;
	// the job has ended. Time is when it ended.
	EventExited EventType = "exited"
	// EventStatus: a report of a running job's output counters, about every
	// second.
	EventStatus EventType = "status"
	// EventSynced: the stream has reported every job the agent knows (a
	// started or an exited event each); what follows is news. A job the
	// caller thinks runs there but that was not reported is unknown to the
	// agent. Job is empty.
	EventSynced EventType = "synced"
	// EventKeepalive carries nothing: the event stream sends one every
	// EventsKeepalive in which it sent nothing else, so that a caller that
	// got no line for three times that takes the stream for hung
	// (ErrStreamIdle). Callers drop it; an older one, which knows no such
	// type, finds no job of its empty Job and drops it too.
	EventKeepalive EventType = "keepalive"
	// EventWorker: the worker's own state (Worker set), in the snapshot
	// before EventSynced and again whenever it changes. Job is empty, so
	// a caller that knows no such type drops it as a keepalive.
	EventWorker EventType = "worker"
)

// EventsKeepalive is how often a quiet event stream gets an
// EventKeepalive.
const EventsKeepalive = ControlKeepalive

// Event is one line of the agent's event stream.
type Event struct {
	Type EventType `json:"type"`
	Job  string    `json:"job,omitempty"`
	Time time.Time `json:"time"`
	PGID int       `json:"pgid,omitempty"`
	// ExitCode is set on EventExited, as a shell reports it (128+N after
	// signal N; the trap's own status when a trap handled the signal). It
	// is nil when Lost.
	ExitCode *int `json:"exitCode,omitempty"`
	// Lost is set on EventExited when the agent restarted while the command
	// ran, so its exit status is unknown.
	Lost bool `json:"lost,omitempty"`
	// OutputBytes counts the bytes the command wrote; DroppedBytes those of
	// them that the spool did not keep.
	OutputBytes  int64 `json:"outputBytes,omitempty"`
	DroppedBytes int64 `json:"droppedBytes,omitempty"`
	// LastOutput is when the command last wrote, for idle timeouts.
	LastOutput *time.Time `json:"lastOutput,omitempty"`
	// OOMKills is set on EventExited: how many processes the kernel's
	// out-of-memory killer killed in the worker's container while the
	// command ran.
	OOMKills int64 `json:"oomKills,omitempty"`
	// Shutdown is set on EventExited when the agent stopped the command
	// because the agent itself was asked to end: its pod is going away.
	Shutdown bool `json:"shutdown,omitempty"`
	// Files is set on EventExited: the regular files the job's
	// $SHELLJOB_OUT held when the command ended, inputs included. It is
	// nil from an agent that does not count them, or when counting failed:
	// GetFiles tells then.
	Files *Files `json:"files,omitempty"`
	// Signals is set on EventExited: the signals sent to the job's group
	// when asked, in order; an agent's own stop on its way out is not
	// among them (Shutdown says it).
	Signals []SentSignal `json:"signals,omitempty"`
	// Worker is set on EventWorker.
	Worker *Worker `json:"worker,omitempty"`
}

// EndedAlone tells whether an EventExited is that of a command that ended
// by itself: its exit code is known, no signal was sent to its group, and
// its worker neither lost it, shut it down, nor saw an out-of-memory kill
// while it ran. A job's status records such an exit as it is.
func (e Event) EndedAlone() bool {
	return e.Type == EventExited && e.ExitCode != nil && !e.Lost && !e.Shutdown && e.OOMKills == 0 && len(e.Signals) == 0
}

// LeftNoFiles tells whether an EventExited counts no file in the job's
// $SHELLJOB_OUT; an agent that did not count them leaves it false.
func (e Event) LeftNoFiles() bool { return e.Files != nil && e.Files.Count == 0 }

// Worker is the state of a worker's agent that decides what it may run.
type Worker struct {
	// Isolation says how jobs are kept apart there.
	Isolation Isolation `json:"isolation"`
	// IsolationLimit says, when Isolation is not IsolationNamespaces, why
	// not, and what a job there can see of the others.
	IsolationLimit string `json:"isolationLimit,omitempty"`
	// SpoolFull is set while the spools of jobs not yet delivered leave
	// no room within SpoolBudget for the output of one more job: the
	// worker must take no new job until deliveries free some room.
	SpoolFull bool `json:"spoolFull,omitempty"`
	// SpoolBytes is the disk the spools take; SpoolBudget what the agent
	// keeps them within, below the spool volume's sizeLimit (0: no budget
	// known).
	SpoolBytes  int64 `json:"spoolBytes,omitempty"`
	SpoolBudget int64 `json:"spoolBudget,omitempty"`
}

// Isolation is how a worker keeps its jobs apart.
type Isolation string

const (
	// IsolationNamespaces: each job runs as a user of its own, in user,
	// PID, mount and IPC namespaces of its own (the Stateful shell in
	// one of its own too): no job sees another's processes or command
	// lines, and a job's processes all end with it.
	IsolationNamespaces Isolation = "Namespaces"
	// IsolationUsers: each job runs as a user of its own, in the pod's
	// namespaces: a job cannot read, signal or write into another, but
	// sees the other jobs' processes and command lines in /proc.
	IsolationUsers Isolation = "Users"
	// IsolationNone: every job runs as the agent's own user.
	IsolationNone Isolation = "None"
)

// Files counts the regular files of a job's $SHELLJOB_OUT, in every
// subdirectory, and their bytes: what GetFiles would send beside
// directories and links.
type Files struct {
	Count int64 `json:"count"`
	Bytes int64 `json:"bytes"`
}

// Client reaches the agent of a worker pod. The operator, the bot and the
// CLI use the exec implementation in internal/agentclient; tests may use an
// in-process one (agent.Pods). Errors name the pod.
type Client interface {
	// Start runs a command. It is idempotent per job.
	Start(ctx context.Context, pod types.NamespacedName, req StartRequest) (StartResponse, error)
	// Signal sends sig to the job's process group. The first signal also
	// marks the job's output as stopped: at most 256 KiB more is kept.
	Signal(ctx context.Context, pod types.NamespacedName, job string, sig Signal) (SignalResponse, error)
	// Events streams the events of every job of the pod, starting with the
	// state of each known job and EventSynced, until ctx ends or the stream
	// breaks.
	Events(ctx context.Context, pod types.NamespacedName, handle func(Event)) error
	// Follow copies the job's output from byte offset to w, and returns when
	// the output is closed (the job ended) with the offset reached. On an
	// error it returns the offset reached so far: follow again from there.
	//
	// Offsets count the bytes the command wrote, as Event.OutputBytes does,
	// whether or not they were kept. Where the bytes from the offset on are
	// no longer kept (the middle of a long output, or more than 256 KiB
	// after a stop), w gets GapLine or AfterStopLine instead and the offset
	// moves past them. So resume from the returned offset, not from the
	// number of bytes written to w. A reader that keeps up gets every byte;
	// one that falls behind by more than the tail cap gets the gap line.
	// Following an ended job from 0 gives exactly what the spool kept. A w
	// that is a FollowSink gets the output and what stands for the bytes
	// not kept through its methods instead (SinkOf); one that is an
	// ExitSink also gets the job's exit just before the output's end, when
	// the agent tells it (over a control channel).
	//
	// With offset AwaitStart, Follow first waits for the job to start on
	// the pod, for as long as ctx lasts, then follows it from 0.
	//
	// A stream that moves no byte, keepalives included, for the client's
	// idle limit is cut with an error that wraps ErrStreamIdle: follow
	// again from the offset returned. PutFiles and GetFiles are cut so too.
	Follow(ctx context.Context, pod types.NamespacedName, job string, offset int64, w io.Writer) (int64, error)
	// FollowText writes to w the job's output from its start as its final
	// shows it, in mode (see TextMagic), made in the pod: once the job has
	// ended, the whole of it. It returns once the output is closed. A cut
	// stream is not resumed: read it again from the start.
	FollowText(ctx context.Context, pod types.NamespacedName, job string, mode TextMode, w io.Writer) error
	// PutFiles unpacks a tar stream into the job's $SHELLJOB_OUT directory,
	// before the job starts: the command's inputs.
	PutFiles(ctx context.Context, pod types.NamespacedName, job string, tar io.Reader) error
	// GetFiles writes the job's $SHELLJOB_OUT directory as a tar stream,
	// from byte offset of it on. Once the job has ended, the stream is the
	// same at every read: a reader cut half way reads the rest from the
	// offset it reached. An agent older than offsets fails an offset past
	// 0 with an error that wraps ErrUsage.
	GetFiles(ctx context.Context, pod types.NamespacedName, job string, offset int64, w io.Writer) error
	// Delivered tells the agent that the job's output and files reached
	// their reader: its spool may go once the worker needs the room. It is
	// idempotent. An agent older than it fails with an error that wraps
	// ErrUsage.
	Delivered(ctx context.Context, pod types.NamespacedName, job string) error
	// Hangup hangs up the console of Console job, as the end of its attach
	// does, and ends that attach: with a session, only if the attach on
	// the console is session's (FlagSession). It is idempotent, and does
	// nothing to a console that has ended; a job that is no console is an
	// error. An agent older than it fails with an error that wraps
	// ErrUsage.
	Hangup(ctx context.Context, pod types.NamespacedName, job, session string) error
}

// ControlRequest is one line on the control channel's stdin, answered by
// the ControlMessages with the same ID: a start, a signal, a delivered or
// a hangup, answered once (an empty answer for delivered and hangup); a
// follow, answered by its stream; or the cancel of a follow (ID is the
// follow's), not answered.
type ControlRequest struct {
	ID uint64 `json:"id"`
	// Op is CmdStart, CmdSignal, CmdDelivered, CmdHangup, CmdFollow or
	// OpCancel.
	Op     string        `json:"op"`
	Start  *StartRequest `json:"start,omitempty"`
	Job    string        `json:"job,omitempty"`
	Signal Signal        `json:"signal,omitempty"`
	// Session is a hangup's, as hangup's FlagSession.
	Session string `json:"session,omitempty"`
	// Offset is a follow's, as follow's --offset (AwaitStart included).
	Offset int64 `json:"offset,omitempty"`
	// Text asks a follow for the job's final text stream, as follow's
	// FlagText; Offset is then 0. An older agent ignores it and sends the
	// follow stream: ReadText reads either.
	Text TextMode `json:"text,omitempty"`
	// Deflate lets a follow's pieces come compressed (Deflated). An older
	// agent ignores it and sends them as they are.
	Deflate bool `json:"deflate,omitempty"`
	// Exit asks a follow for the x frame, the job's exit, before its e
	// frame (FollowMagic). An older agent ignores it and sends none.
	Exit bool `json:"exit,omitempty"`
}

// OpCancel ends the follow of the request's ID.
const OpCancel = "cancel"

// OpPing keeps a control channel open; it is not answered. A caller sends
// a request or a ping at least every ControlKeepalive, and the agent ends
// a channel that got nothing for three times that: a caller that went
// away without closing the exec's stdin (the container runtime need not
// close it) leaves no control process behind.
//
// The other way, the agent sends an empty ControlMessage every
// ControlKeepalive in which its daemon answered, events or not: a caller
// that got no message for three times that takes the channel for hung
// and cuts it (ErrStreamIdle). Callers have always dropped empty
// messages: they need no new version.
const (
	OpPing           = "ping"
	ControlKeepalive = 20 * time.Second
)

// ControlMessage is one line on the control channel's stdout: an event of
// the event stream (Event set), the answer to the request ID, or a piece
// of a follow's stream.
type ControlMessage struct {
	Event *Event `json:"event,omitempty"`

	ID     uint64          `json:"id,omitempty"`
	Start  *StartResponse  `json:"start,omitempty"`
	Signal *SignalResponse `json:"signal,omitempty"`
	// Data is the next piece of a follow's framed stream, as follow
	// --framed writes it; End ends the stream, with Error if it broke.
	Data []byte `json:"data,omitempty"`
	// Deflated says that Data is raw DEFLATE (deflate.Pieces), for a
	// follow that asked with Deflate.
	Deflated bool `json:"deflated,omitempty"`
	End      bool `json:"end,omitempty"`
	// Error is a failed request's error, and Code the exit code the
	// one-shot subcommand would have given it (ExitUnknownJob…).
	Error string `json:"error,omitempty"`
	Code  int    `json:"code,omitempty"`
}

// Signal is a signal the agent sends to a process group.
type Signal string

const (
	SIGINT  Signal = "INT"
	SIGTERM Signal = "TERM"
	SIGKILL Signal = "KILL"
)
