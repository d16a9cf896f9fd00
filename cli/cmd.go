package cli

import (
	"io"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/utils/clock"
)

// IOStreams are the standard streams of a command. Tests give buffers.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
}

// Options are what the commands share.
type Options struct {
	IOStreams
	// Clock tells the time. Defaults to the real clock.
	Clock clock.PassiveClock
}

// NewDefaultCmd returns the root command on the process's standard streams.
func NewDefaultCmd() *cobra.Command {
	return NewCmd(Options{
		IOStreams: IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr},
	})
}

// NewCmd returns the root command, kubectl-shelljob, with its subcommands.
func NewCmd(o Options) *cobra.Command {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	cmd := &cobra.Command{
		Use:   "kubectl-shelljob",
		Short: "Run shell commands in the worker pods of a ShellPool",
		Annotations: map[string]string{
			cobra.CommandDisplayNameAnnotation: "kubectl shelljob",
		},
	}
	cmd.SetIn(o.In)
	cmd.SetOut(o.Out)
	cmd.SetErr(o.ErrOut)
	cmd.AddCommand(NewRenderCmd(o.IOStreams))
	return cmd
}
