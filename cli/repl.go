package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/chzyer/readline"
	"github.com/spf13/cobra"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
)

// ReplOptions are the options of the repl command.
type ReplOptions struct {
	*Options
	Pool    string
	Timeout time.Duration

	// interactive is true when stdin is a terminal.
	interactive bool
}

// NewReplCmd returns the repl command.
func NewReplCmd(o *Options) *cobra.Command {
	r := &ReplOptions{Options: o}
	cmd := &cobra.Command{
		Use:   "repl [--pool P]",
		Short: "Run lines one by one in the pool's persistent shell",
		Long: `Reads shell lines at a prompt, with line editing and history, and runs each
as a Stateful job in the pool's persistent shell, so that cd and variables
carry over from one line to the next. The output streams live; Ctrl-C stops
the line's job, Ctrl-D at the prompt ends the repl.

When the standard input is not a terminal, all of it runs as one job.`,
		Example: `  kubectl shelljob repl --pool shell
  printf 'cd /tmp\npwd\n' | kubectl shelljob repl`,
		DisableFlagsInUseLine: true,
		Args:                  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SilenceUsage = true
			r.Complete()
			return r.Run(cmd.Context())
		},
	}
	addPoolFlag(cmd, o, &r.Pool)
	cmd.Flags().DurationVar(&r.Timeout, "timeout", 0, "stop a line's job after this long without output; 0 for never")
	return cmd
}

// Complete tells a terminal from a pipe.
func (r *ReplOptions) Complete() { r.interactive = isTerminal(r.In) }

// Run runs the repl: at a prompt on a terminal, else all of stdin as one
// job, whose exit code it ends with.
func (r *ReplOptions) Run(ctx context.Context) error {
	if !r.interactive {
		command, err := readCommand(r.In)
		if err != nil {
			return err
		}
		return r.runJobs(ctx, func() (string, error) {
			c := command
			command = ""
			if c == "" {
				return "", io.EOF
			}
			return c, nil
		})
	}
	rl, err := readline.NewEx(&readline.Config{
		Prompt:          r.Pool + "> ",
		HistoryFile:     historyFile(),
		Stdin:           io.NopCloser(r.In),
		Stdout:          r.Out,
		Stderr:          r.ErrOut,
		InterruptPrompt: "^C",
		EOFPrompt:       "exit",
	})
	if err != nil {
		return err
	}
	defer rl.Close()
	return r.runJobs(ctx, func() (string, error) {
		for {
			line, err := rl.Readline()
			if errors.Is(err, readline.ErrInterrupt) {
				continue
			}
			if err != nil {
				return "", err
			}
			if strings.TrimSpace(line) != "" {
				return line, nil
			}
		}
	})
}

// runJobs runs each command next gives as a Stateful job, until next
// returns io.EOF, and ends with the last job's exit code.
func (r *ReplOptions) runJobs(ctx context.Context, next func() (string, error)) error {
	cluster, err := r.Cluster()
	if err != nil {
		return err
	}
	interrupts, stop := r.Interrupts()
	defer stop()
	run := &runner{cluster: cluster, IOStreams: r.IOStreams, interrupts: interrupts, clock: r.Clock}
	code := 0
	for {
		command, err := next()
		if errors.Is(err, io.EOF) {
			return exitCodeOrNil(code)
		}
		if err != nil {
			return err
		}
		// A Ctrl-C at the prompt is not meant for the next job.
		for len(interrupts) > 0 {
			<-interrupts
		}
		code, err = run.run(ctx, jobRequest{Command: command, Mode: shellv1alpha1.ModeStateful, Pool: r.Pool, Timeout: r.Timeout})
		if err != nil {
			if !r.interactive {
				return err
			}
			fmt.Fprintln(r.ErrOut, "error:", err)
		}
	}
}

func exitCodeOrNil(code int) error {
	if code == 0 {
		return nil
	}
	return exitCode(code)
}

// historyFile is where the repl keeps its history, "" for none.
func historyFile() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	dir = filepath.Join(dir, "shelljob")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return ""
	}
	return filepath.Join(dir, "repl_history")
}
