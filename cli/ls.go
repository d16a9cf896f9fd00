package cli

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/printers"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/shelljob"
)

// LsOptions are the options of the ls command.
type LsOptions struct {
	*Options
	All bool
}

// NewLsCmd returns the ls command.
func NewLsCmd(o *Options) *cobra.Command {
	l := &LsOptions{Options: o}
	cmd := &cobra.Command{
		Use:   "ls [--all]",
		Short: "List the jobs that are queued or running",
		Long: `Lists the ShellJobs of the namespace that are queued or running, or every
one with --all: number, age, phase, owner and the first 60 characters of the
command.`,
		Example:               "  kubectl shelljob ls --all",
		DisableFlagsInUseLine: true,
		Args:                  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SilenceUsage = true
			return l.Run(cmd.Context())
		},
	}
	cmd.Flags().BoolVarP(&l.All, "all", "A", false, "list the jobs that have ended too")
	return cmd
}

// Run prints the table.
func (l *LsOptions) Run(ctx context.Context) error {
	c, err := l.Cluster()
	if err != nil {
		return err
	}
	jobs, err := c.listJobs(ctx, func(j *shellv1alpha1.ShellJob) bool {
		return l.All || !shelljob.IsFinished(j)
	})
	if err != nil {
		return fmt.Errorf("list shelljobs: %w", err)
	}
	if len(jobs) == 0 {
		fmt.Fprintf(l.ErrOut, "No resources found in %s namespace.\n", c.Namespace)
		return nil
	}
	sort.SliceStable(jobs, func(a, b int) bool { return jobs[a].Status.Number < jobs[b].Status.Number })
	w := printers.GetNewTabWriter(l.Out)
	fmt.Fprintln(w, "#\tNAME\tAGE\tPHASE\tOWNER\tCOMMAND")
	now := l.Clock.Now()
	for i := range jobs {
		j := &jobs[i]
		num := "-"
		if j.Status.Number != 0 {
			num = strconv.FormatInt(j.Status.Number, 10)
		}
		summary := shelljob.SummaryOf(j)
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", num, j.Name, age(now, j.CreationTimestamp), shelljob.Phase(j), owner(j), summary)
	}
	return w.Flush()
}

// owner is who made the job: the Kubernetes user it was created as, or
// tg:ID for a Telegram job of an older bot, which recorded no such user.
func owner(j *shellv1alpha1.ShellJob) string {
	if u := shelljob.KubernetesUser(j); u != "" {
		return u
	}
	if id, ok := shelljob.TelegramUser(j); ok {
		return "tg:" + strconv.FormatInt(id, 10)
	}
	return "<none>"
}
