package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/outfiles"
	"shelljob.dev/shelljob/internal/texts"
)

var execLong = `Runs a shell command as a ShellJob on a worker of a ShellPool, streams its
output live, and exits with the command's exit code.

The command is what follows --, the file of -f, or, with neither, the
standard input when it is not a terminal. It may be at most 64 KiB, the
API's limit; a longer one fails before anything is created.

--timeout is the longest the command may stay silent. Past it, the job is
stopped with reason Timeout and the exit code is 124.

Ctrl-C stops the job (` + agentapi.StopLadderText() + `) and waits for its
end. A second Ctrl-C detaches; the job goes on stopping.

Files the command leaves in $SHELLJOB_OUT are saved under --output-dir and
their paths printed, each streamed to its file, within the bot's limits:
at most ` + strconv.Itoa(outfiles.DefaultCount) + ` files, each up to ` + texts.Size(outfiles.DefaultFileBytes) + ` and ` + texts.Size(outfiles.DefaultJobBytes) + `
in all; a warning names those left out. PNG images are also shown
inline, with the kitty graphics protocol, when the standard output is a
terminal.

Once the output is read to its end and the files are saved, the job is
marked delivered (the shell.shelljob.dev/delivered annotation), as the
bot marks its own: the operator then need not keep its worker for it. A
detached job is not marked.`

const execExample = `  # Run a command on the default pool.
  kubectl shelljob exec -- uname -a

  # Run a script, with no idle timeout, in the pool's persistent shell.
  cat script.sh | kubectl shelljob exec --mode stateful --timeout 0

  # Run a local file's contents on the gpu pool.
  kubectl shelljob exec --pool gpu -f train.sh`

// ExecOptions are the options of the exec command.
type ExecOptions struct {
	*Options
	Pool      string
	Mode      string
	Timeout   time.Duration
	File      string
	Render    bool
	OutputDir string

	command string
}

// NewExecCmd returns the exec command.
func NewExecCmd(o *Options) *cobra.Command {
	e := &ExecOptions{Options: o}
	cmd := &cobra.Command{
		Use:                   "exec [--pool P] [--mode fork|stateful|direct] [--timeout 30s] [-f FILE | -- CMD...]",
		DisableFlagsInUseLine: true,
		Short:                 "Run a shell command on a pool and stream its output",
		Long:                  execLong,
		Example:               execExample,
		RunE: func(cmd *cobra.Command, args []string) error {
			cmd.SilenceUsage = true
			if err := e.Complete(cmd, args); err != nil {
				return err
			}
			return e.Run(cmd.Context())
		},
	}
	addPoolFlag(cmd, o, &e.Pool)
	cmd.Flags().StringVar(&e.Mode, "mode", "fork", "fork (a fresh shell on a free worker), stateful (the pool's persistent shell) or direct (at once, even on a busy worker)")
	_ = cmd.RegisterFlagCompletionFunc("mode", cobra.FixedCompletions([]string{"fork", "stateful", "direct"}, cobra.ShellCompDirectiveNoFileComp))
	cmd.Flags().DurationVar(&e.Timeout, "timeout", 30*time.Second, "stop the job after this long without output; 0 for never")
	cmd.Flags().StringVarP(&e.File, "filename", "f", "", "run the contents of this file; - for the standard input")
	cmd.Flags().BoolVar(&e.Render, "render", false, "print the output as a terminal would show it, once the job ends")
	cmd.Flags().StringVar(&e.OutputDir, "output-dir", "", "where to save the files of $SHELLJOB_OUT (default ./shelljob-out/JOB)")
	return cmd
}

// parseMode turns the --mode value into the API's mode.
func parseMode(s string) (shellv1alpha1.ShellJobMode, error) {
	for _, m := range []shellv1alpha1.ShellJobMode{shellv1alpha1.ModeFork, shellv1alpha1.ModeStateful, shellv1alpha1.ModeDirect} {
		if strings.EqualFold(s, string(m)) {
			return m, nil
		}
	}
	return "", fmt.Errorf("invalid --mode %q: want fork, stateful or direct", s)
}

// Complete finds the command: after --, in -f, or on a piped stdin.
func (e *ExecOptions) Complete(cmd *cobra.Command, args []string) error {
	if _, err := parseMode(e.Mode); err != nil {
		return err
	}
	if e.Timeout < 0 {
		return errors.New("--timeout must not be negative")
	}
	dash := cmd.ArgsLenAtDash()
	switch {
	case len(args) > 0 && dash != 0:
		return fmt.Errorf("the command goes after --: kubectl shelljob exec -- %s", strings.Join(args, " "))
	case len(args) > 0 && e.File != "":
		return errors.New("give the command either after -- or with -f, not both")
	case len(args) > 0:
		e.command = strings.Join(args, " ")
	case e.File == "-":
		return e.readCommand(e.In)
	case e.File != "":
		f, err := os.Open(e.File)
		if err != nil {
			return err
		}
		defer f.Close()
		return e.readCommand(f)
	case !isTerminal(e.In):
		return e.readCommand(e.In)
	default:
		return errors.New("no command: give one after --, with -f FILE, or on the standard input")
	}
	if len(e.command) > maxCommand {
		return errCommandTooLong
	}
	return nil
}

// readCommand reads the whole command from r, or fails as soon as it is
// past the API's limit, without reading the rest.
func (e *ExecOptions) readCommand(r io.Reader) error {
	cmd, err := readCommand(r)
	e.command = cmd
	return err
}

func readCommand(r io.Reader) (string, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxCommand+1))
	if err != nil {
		return "", err
	}
	if len(data) > maxCommand {
		return "", errCommandTooLong
	}
	return string(data), nil
}

// Run runs the command and ends with its exit code.
func (e *ExecOptions) Run(ctx context.Context) error {
	mode, _ := parseMode(e.Mode)
	cluster, err := e.Cluster()
	if err != nil {
		return err
	}
	interrupts, stop := e.Interrupts()
	defer stop()
	r := &runner{cluster: cluster, IOStreams: e.IOStreams, interrupts: interrupts, render: e.Render, outputDir: e.OutputDir, clock: e.Clock}
	code, err := r.run(ctx, jobRequest{Command: e.command, Mode: mode, Pool: e.Pool, Timeout: e.Timeout})
	if err != nil {
		return err
	}
	return exitCodeOrNil(code)
}
