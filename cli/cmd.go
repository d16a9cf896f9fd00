package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Options are what the commands share.
type Options struct {
	genericiooptions.IOStreams
	// Clock tells the time. Defaults to the real clock.
	Clock clock.PassiveClock
	// Cluster reaches the cluster. Defaults to one on kubectl's flags
	// (--kubeconfig, --context, -n and the others).
	Cluster ClusterGetter
	// Interrupts delivers Ctrl-C until stop is called. Defaults to
	// os.Interrupt through signal.Notify.
	Interrupts func() (c <-chan os.Signal, stop func())
}

// NewDefaultCmd returns the root command on the process's standard streams.
func NewDefaultCmd() *cobra.Command {
	return NewCmd(Options{
		IOStreams: genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr},
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
		Long: `Runs shell commands as ShellJobs in the worker pods of a ShellPool, as the
shelljob Telegram bot does for chat admins, and manages them.

It takes kubectl's flags and uses the current context and namespace as
kubectl does.`,
		Annotations: map[string]string{
			cobra.CommandDisplayNameAnnotation: "kubectl shelljob",
		},
		// Main prints errors as kubectl does, with no usage dump.
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	cmd.SetIn(o.In)
	cmd.SetOut(o.Out)
	cmd.SetErr(o.ErrOut)
	var verbosity int
	cmd.PersistentFlags().IntVarP(&verbosity, "v", "v", 0,
		"log level of the Kubernetes client's own messages, as kubectl's -v (0: none; the command's errors are always printed)")
	cmd.PersistentPreRunE = func(*cobra.Command, []string) error { return clientLogs(verbosity, o.ErrOut) }
	if o.Cluster == nil {
		flags := genericclioptions.NewConfigFlags(true)
		flags.AddFlags(cmd.PersistentFlags())
		o.Cluster = NewClusterGetter(flags)
	}
	if o.Interrupts == nil {
		o.Interrupts = func() (<-chan os.Signal, func()) {
			c := make(chan os.Signal, 2)
			signal.Notify(c, os.Interrupt)
			return c, func() { signal.Stop(c) }
		}
	}
	cmd.AddCommand(
		NewExecCmd(&o),
		NewReplCmd(&o),
		NewConsoleCmd(&o),
		NewLogsCmd(&o),
		NewLsCmd(&o),
		NewStopCmd(&o),
		NewApproveCmd(&o),
		NewDenyCmd(&o),
		NewPoolsCmd(&o),
		NewRenderCmd(o.IOStreams),
	)
	return cmd
}

// clientLogs sets where client-go's klog lines go. At level 0 they go
// nowhere: client-go logs what it also returns (a stream cut by our own
// cancel logs "Copying stderr failed"), and the command prints the
// returned error once, in its own words.
func clientLogs(verbosity int, errOut io.Writer) error {
	if verbosity <= 0 {
		klog.SetLogger(logr.Discard())
		return nil
	}
	var fs flag.FlagSet
	klog.InitFlags(&fs)
	klog.SetOutput(errOut)
	return fs.Set("v", strconv.Itoa(verbosity))
}

// exitCode ends the process with a command's exit code, after the command
// said why; Main prints nothing for it.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// Main runs cmd on the process's arguments and returns the exit code:
// the command's own for exec, 1 for an error, which it prints as kubectl
// does.
func Main(cmd *cobra.Command, errOut io.Writer) int {
	err := cmd.Execute()
	var code exitCode
	switch {
	case err == nil:
		return 0
	case errors.As(err, &code):
		return int(code)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "error: ") {
		msg = "error: " + msg
	}
	fmt.Fprintln(errOut, msg)
	if strings.Contains(msg, "unknown flag") || strings.Contains(msg, "unknown command") || strings.Contains(msg, "arg(s)") {
		fmt.Fprintln(errOut, "See 'kubectl shelljob --help' for usage.")
	}
	return 1
}
