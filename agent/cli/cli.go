package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/go-logr/logr"

	"shelljob.dev/shelljob/agent"
	"shelljob.dev/shelljob/agent/proc"
	"shelljob.dev/shelljob/agent/spool"
	"shelljob.dev/shelljob/internal/agentapi"
)

// maxStartBytes bounds a start request on stdin: a 64 KiB command, escaped.
const maxStartBytes = 1 << 20

const usage = `usage: shelljob-agent [serve] [flags]     run the daemon (PID 1 of a worker)
       shelljob-agent start                  StartRequest JSON on stdin
       shelljob-agent signal --job J --signal INT|TERM|KILL
       shelljob-agent stop --job J [--step 2s]   INT, TERM, KILL, a step apart
       shelljob-agent events [--watch-stdin]
       shelljob-agent follow --job J|- [--offset N|-1] [--framed|--text=escaped|rendered] [--watch-stdin]   -1: await the start; -: J on stdin
       shelljob-agent put-files --job J      tar on stdin
       shelljob-agent get-files --job J [--offset N]   tar on stdout
       shelljob-agent delivered --job J      J was delivered: its spool may go for room
       shelljob-agent ping                   exit 0 once the daemon answers
       shelljob-agent control [--no-events] [--keepalive 20s]  requests on stdin, answers and events on stdout
       shelljob-agent attach --job J [--session S]   a terminal on the console J; exits with its status
       shelljob-agent hangup --job J [--session S]   hang the console J up, and end its attach (S's alone)
Every subcommand takes --spool-dir (default $` + agentapi.SpoolDirEnv + ` or ` + agentapi.SpoolDir + `),
--socket and --protocol.
`

// Main runs the command line with args (without the program name) and
// returns the exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	run := map[string]func(*env, []string) error{
		"serve":              serve,
		agentapi.CmdStart:    start,
		agentapi.CmdSignal:   signalCmd,
		"stop":               stop,
		agentapi.CmdEvents:   events,
		agentapi.CmdFollow:   follow,
		agentapi.CmdPutFiles: putFiles,
		agentapi.CmdGetFiles: getFiles,
		agentapi.CmdPing:     ping,
		agentapi.CmdControl:  control,
		agentapi.CmdAttach:   attach,
		agentapi.CmdHangup:   hangup,
		agentapi.CmdDelivered: func(e *env, args []string) error {
			return onJob(e, args, func(ctx context.Context, c *agent.Client, job string) error { return c.Delivered(ctx, job) })
		},
		// The agent's own, run by the daemon: a job's PID 1, and the
		// killer of an ended job's leftovers.
		agent.InitCommand:     jobInit,
		agent.KillUserCommand: func(*env, []string) error { return agent.KillUser() },
	}[cmd]
	if run == nil {
		fmt.Fprint(stderr, usage)
		return agentapi.ExitUsage
	}
	e := &env{cmd: cmd, stdin: stdin, stdout: stdout, stderr: stderr}
	err := run(e, args)
	var (
		u      usageError
		status exitStatus
	)
	switch {
	case err == nil:
		return 0
	case errors.As(err, &status):
		return int(status)
	case errors.As(err, &u):
		fmt.Fprintf(stderr, "shelljob-agent %s: %v\n", cmd, err)
		return agentapi.ExitUsage
	case errors.Is(err, flag.ErrHelp):
		return agentapi.ExitUsage
	}
	fmt.Fprintf(stderr, "shelljob-agent %s: %v\n", cmd, err)
	return agent.ExitCode(err)
}

type usageError struct{ error }

// exitStatus ends the subcommand with a status of its own, said nowhere
// else: the exit status of a console's command.
type exitStatus int

func (s exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(s)) }

type env struct {
	cmd            string
	stdin          io.Reader
	stdout, stderr io.Writer

	fs       *flag.FlagSet
	spoolDir string
	socket   string
	protocol int
	job      string
}

// flags starts the subcommand's flag set with the common flags.
func (e *env) flags() *flag.FlagSet {
	e.fs = flag.NewFlagSet(e.cmd, flag.ContinueOnError)
	e.fs.SetOutput(e.stderr)
	def := os.Getenv(agentapi.SpoolDirEnv)
	if def == "" {
		def = agentapi.SpoolDir
	}
	e.fs.StringVar(&e.spoolDir, "spool-dir", def, "the spool directory")
	e.fs.StringVar(&e.socket, "socket", "", "the daemon's socket (default SPOOL-DIR/agent.sock)")
	e.fs.IntVar(&e.protocol, "protocol", agentapi.ProtocolVersion, "the exec protocol the caller speaks")
	return e.fs
}

// parse parses args, checks the protocol and makes the client.
func (e *env) parse(args []string) (*agent.Client, error) {
	if err := e.fs.Parse(args); err != nil {
		return nil, err
	}
	if e.fs.NArg() > 0 {
		return nil, usageError{fmt.Errorf("unexpected arguments %q", e.fs.Args())}
	}
	if e.protocol < 1 || e.protocol > agentapi.ProtocolVersion {
		return nil, fmt.Errorf("caller speaks protocol %d, this agent %d: %w", e.protocol, agentapi.ProtocolVersion, agentapi.ErrProtocol)
	}
	if e.socket == "" {
		e.socket = agent.SocketPath(e.spoolDir)
	}
	return agent.NewClient(e.socket), nil
}

// jobFlags is flags for a subcommand that acts on one job: it adds --job.
func (e *env) jobFlags() *flag.FlagSet {
	fs := e.flags()
	fs.StringVar(&e.job, "job", "", "the job")
	return fs
}

// parseJob is parse for a subcommand started with jobFlags: --job is
// required.
func (e *env) parseJob(args []string) (*agent.Client, error) {
	c, err := e.parse(args)
	if err != nil {
		return nil, err
	}
	if e.job == "" {
		return nil, usageError{errors.New("--job is required")}
	}
	return c, nil
}

// context ends on SIGINT or SIGTERM, and with watchStdin when stdin closes:
// the exec that ran the subcommand is gone.
func (e *env) context(watchStdin bool) (context.Context, context.CancelFunc) {
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	if watchStdin {
		go func() {
			_, _ = io.Copy(io.Discard, e.stdin)
			cancel()
		}()
	}
	return ctx, cancel
}

func (e *env) printJSON(v any) error {
	return json.NewEncoder(e.stdout).Encode(v)
}

func serve(e *env, args []string) error {
	fs := e.flags()
	var (
		opts agent.Options
		lim  spool.Limits
		v    int
	)
	fs.StringVar(&opts.Shell, "shell", "", "the shell of jobs that name none (default $"+agentapi.ShellEnv+", or zsh)")
	fs.StringVar(&opts.Home, "home", "", "the working directory of commands (default $HOME)")
	fs.Func("isolation", "auto, required or off: whether each job runs as a user of its own; auto when the agent may (default auto)", func(v string) error {
		switch i := agent.Isolation(v); i {
		case agent.IsolationAuto, agent.IsolationRequired, agent.IsolationOff:
			opts.Isolation = i
			return nil
		}
		return fmt.Errorf("not auto, required or off")
	})
	fs.Func("fork-uids", "FIRST-LAST: the users of Fork jobs (default "+agent.DefaultForkUIDs.String()+")", func(v string) error {
		r, err := agent.ParseUIDRange(v)
		opts.ForkUIDs = r
		return err
	})
	fs.Func("namespaces", "auto or off: whether isolated jobs run in namespaces of their own where the worker allows it (default auto)", func(v string) error {
		switch v {
		case "auto":
			opts.NoNamespaces = false
		case "off":
			opts.NoNamespaces = true
		default:
			return fmt.Errorf("not auto or off")
		}
		return nil
	})
	fs.Func("shared-dirs", "comma-separated places every user may write, which an ended Fork job's files go from (default: the image's world-writable directories as PID 1, else /tmp,/var/tmp,/dev/shm)", func(v string) error {
		opts.SharedDirs = strings.Split(v, ",")
		return nil
	})
	fs.Int64Var(&opts.SpoolSizeLimit, "spool-size-limit", 0, "the spool volume's size in bytes, below which the spools are kept (default $"+agentapi.SpoolSizeLimitEnv+"; 0: no budget)")
	fs.StringVar(&opts.ReadyAddr, "ready-addr", "", "serve GET "+agentapi.ReadyPath+" on this TCP address, such as :8079 (default none)")
	fs.DurationVar(&opts.Retention, "retention", agent.DefaultRetention, "how long an ended job's spool stays; negative: forever")
	fs.DurationVar(&opts.OrphanGrace, "orphan-grace", agent.DefaultOrphanGrace, "how long output may stay open after the job's group is empty")
	fs.DurationVar(&opts.StatusInterval, "status-interval", agent.DefaultStatusInterval, "the pace of status events")
	fs.DurationVar(&opts.FollowKeepalive, "follow-keepalive", agentapi.FollowKeepalive, "how often a follow gets a keepalive frame")
	fs.DurationVar(&opts.EventsKeepalive, "events-keepalive", agentapi.EventsKeepalive, "how often a quiet event stream gets a keepalive event")
	fs.DurationVar(&opts.ConsoleAttachWait, "console-attach-wait", agentapi.ConsoleAttachWait, "how long a console waits for its attach before it is hung up")
	fs.DurationVar(&opts.AttachStartWait, "attach-start-wait", agentapi.AttachStartWait, "the longest an attach waits for its console to start")
	fs.StringVar(&opts.CgroupRoot, "cgroup-root", agent.DefaultCgroupRoot, "where the container's cgroups are mounted, to count its out-of-memory kills")
	fs.Int64Var(&lim.HeadBytes, "head-bytes", spool.DefaultHeadBytes, "bytes kept from the start of an output")
	fs.Int64Var(&lim.TailBytes, "tail-bytes", spool.DefaultTailBytes, "bytes kept from the end of an output")
	fs.Int64Var(&lim.AfterStopBytes, "after-stop-bytes", spool.DefaultAfterStopBytes, "bytes kept after a stop")
	fs.Int64Var(&lim.ChunkBytes, "chunk-bytes", spool.DefaultChunkBytes, "size of the spool's files")
	fs.IntVar(&v, "v", 0, "log verbosity (logr V-levels): 0 logs start-up and errors, 1 also each job, 2 also the persistent shell's output")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected arguments %q", fs.Args())}
	}
	opts.SpoolDir, opts.Socket, opts.Limits = e.spoolDir, e.socket, lim
	opts.Logger = newLogger(e.stderr, v)
	if os.Getpid() != 1 {
		if err := proc.SetSubreaper(); err != nil {
			opts.Logger.Error(err, "Could not become a subreaper; orphans of jobs will not be reaped here")
		}
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	return agent.New(opts).Run(logr.NewContext(ctx, opts.Logger))
}

// jobInit is a job's PID 1 (agent.RunInit).
func jobInit(e *env, args []string) error {
	fs := flag.NewFlagSet(agent.InitCommand, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	specFD := fs.Int("spec-fd", -1, "the descriptor of the init's spec")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *specFD < 3 {
		return usageError{errors.New("--spec-fd is required")}
	}
	os.Exit(agent.RunInit(*specFD))
	return nil
}

func ping(e *env, args []string) error {
	e.flags()
	c, err := e.parse(args)
	if err != nil {
		return err
	}
	ctx, cancel := e.context(false)
	defer cancel()
	return c.Ping(ctx)
}

func start(e *env, args []string) error {
	e.flags()
	c, err := e.parse(args)
	if err != nil {
		return err
	}
	b, err := io.ReadAll(io.LimitReader(e.stdin, maxStartBytes+1))
	if err != nil {
		return fmt.Errorf("read request: %w", err)
	}
	if len(b) > maxStartBytes {
		return usageError{fmt.Errorf("read request: too large: over %d bytes", maxStartBytes)}
	}
	var req agentapi.StartRequest
	if err := json.Unmarshal(b, &req); err != nil {
		return usageError{fmt.Errorf("read request: %w", err)}
	}
	ctx, cancel := e.context(false)
	defer cancel()
	resp, err := c.Start(ctx, req)
	if err != nil {
		return err
	}
	return e.printJSON(resp)
}

func signalCmd(e *env, args []string) error {
	fs := e.jobFlags()
	sig := fs.String("signal", "", "INT, TERM or KILL")
	c, err := e.parseJob(args)
	if err != nil {
		return err
	}
	s, ok := agentapi.ParseSignal(*sig)
	if !ok {
		return usageError{fmt.Errorf("--signal %q: INT, TERM or KILL", *sig)}
	}
	ctx, cancel := e.context(false)
	defer cancel()
	resp, err := c.Signal(ctx, e.job, s)
	if err != nil {
		return err
	}
	return e.printJSON(resp)
}

func stop(e *env, args []string) error {
	fs := e.jobFlags()
	step := fs.Duration("step", agentapi.StopGrace, "time between the signals")
	c, err := e.parseJob(args)
	if err != nil {
		return err
	}
	ctx, cancel := e.context(false)
	defer cancel()
	return c.Stop(ctx, e.job, *step, func(sig agentapi.Signal, r agentapi.SignalResponse) {
		_ = e.printJSON(struct {
			Signal agentapi.Signal `json:"signal"`
			agentapi.SignalResponse
		}{sig, r})
	})
}

func events(e *env, args []string) error {
	fs := e.flags()
	watch := fs.Bool("watch-stdin", false, "end when stdin closes")
	c, err := e.parse(args)
	if err != nil {
		return err
	}
	ctx, cancel := e.context(*watch)
	defer cancel()
	if err := c.EventLines(ctx, e.stdout); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

func follow(e *env, args []string) error {
	fs := e.jobFlags()
	offset := fs.Int64("offset", 0, "the byte offset to follow from")
	framed := fs.Bool("framed", false, "write the framed follow stream")
	text := fs.String("text", "", "write the final text stream from the start: escaped or rendered")
	watch := fs.Bool("watch-stdin", false, "end when stdin closes")
	c, err := e.parseJob(args)
	if err != nil {
		return err
	}
	if *offset < 0 && *offset != agentapi.AwaitStart {
		return usageError{fmt.Errorf("negative --offset %d", *offset)}
	}
	mode := agentapi.TextMode(*text)
	switch {
	case *text == "":
	case !mode.Valid():
		return usageError{fmt.Errorf("--text %q: want %s or %s", *text, agentapi.TextEscaped, agentapi.TextRendered)}
	case *offset != 0:
		return usageError{fmt.Errorf("--text follows from the start, not --offset %d", *offset)}
	}
	if e.job == agentapi.JobFromStdin {
		job, rest, err := readJob(e.stdin)
		if errors.Is(err, io.EOF) {
			return nil // the reader went away before it named the job
		}
		if err != nil {
			return usageError{err}
		}
		e.job, e.stdin = job, rest
	}
	ctx, cancel := e.context(*watch)
	defer cancel()
	if *text != "" {
		return c.FollowText(ctx, e.job, mode, e.stdout)
	}
	if *framed {
		return c.FollowFrames(ctx, e.job, *offset, false, e.stdout)
	}
	_, err = c.Follow(ctx, e.job, *offset, e.stdout)
	return err
}

// readJob reads a job from the first line of stdin, and returns the rest
// of stdin.
func readJob(stdin io.Reader) (string, io.Reader, error) {
	br := bufio.NewReaderSize(stdin, 256) // a job ID is at most 128 bytes
	line, err := br.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		return "", nil, errors.New("the job on stdin is too long")
	case errors.Is(err, io.EOF) && len(line) > 0:
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return "", nil, err
	}
	job := strings.TrimSuffix(string(line), "\n")
	if job == "" {
		return "", nil, errors.New("no job on stdin")
	}
	return job, br, nil
}

func control(e *env, args []string) error {
	fs := e.flags()
	noEvents := fs.Bool("no-events", false, "carry answers only, no events")
	keepalive := fs.Duration("keepalive", agentapi.ControlKeepalive, "how often an empty message goes out while the daemon answers")
	c, err := e.parse(args)
	if err != nil {
		return err
	}
	ctx, cancel := e.context(false)
	defer cancel()
	return c.Control(ctx, e.stdin, e.stdout, agent.ControlOptions{Events: !*noEvents, Keepalive: *keepalive})
}

func hangup(e *env, args []string) error {
	fs := e.jobFlags()
	session := fs.String("session", "", "hang up only if the attach on the console is this one")
	c, err := e.parseJob(args)
	if err != nil {
		return err
	}
	ctx, cancel := e.context(false)
	defer cancel()
	return c.Hangup(ctx, e.job, *session)
}

func putFiles(e *env, args []string) error {
	return onJob(e, args, func(ctx context.Context, c *agent.Client, job string) error {
		return c.PutFiles(ctx, job, e.stdin)
	})
}

func getFiles(e *env, args []string) error {
	fs := e.jobFlags()
	offset := fs.Int64("offset", 0, "the byte of the tar stream to start from")
	c, err := e.parseJob(args)
	if err != nil {
		return err
	}
	if *offset < 0 {
		return usageError{fmt.Errorf("--offset %d: an offset counts bytes from 0", *offset)}
	}
	ctx, cancel := e.context(false)
	defer cancel()
	return c.GetFiles(ctx, e.job, *offset, e.stdout)
}

// onJob runs a subcommand whose only flag of its own is --job.
func onJob(e *env, args []string, do func(ctx context.Context, c *agent.Client, job string) error) error {
	e.jobFlags()
	c, err := e.parseJob(args)
	if err != nil {
		return err
	}
	ctx, cancel := e.context(false)
	defer cancel()
	return do(ctx, c, e.job)
}
