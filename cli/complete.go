package cli

import (
	"context"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/shelljob"
)

// addPoolFlag adds --pool, completed with the pools of the namespace.
func addPoolFlag(cmd *cobra.Command, o *Options, pool *string) {
	cmd.Flags().StringVar(pool, "pool", shellv1alpha1.DefaultPool, "the ShellPool that runs the command")
	_ = cmd.RegisterFlagCompletionFunc("pool", func(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		return completePools(cmd.Context(), o, toComplete), cobra.ShellCompDirectiveNoFileComp
	})
}

func completePools(ctx context.Context, o *Options, prefix string) []string {
	c, err := o.Cluster()
	if err != nil {
		return nil
	}
	list, err := c.Pools.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	var out []string
	for _, p := range list.Items {
		if strings.HasPrefix(p.Name, prefix) {
			out = append(out, p.Name)
		}
	}
	return out
}

// completeJobs completes job names, each with its number and summary;
// unfinished only says whether to leave out the jobs that have ended.
func completeJobs(o *Options, unfinished bool) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
		c, err := o.Cluster()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		jobs, err := c.listJobs(cmd.Context(), nil)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var out []string
		for i := range jobs {
			j := &jobs[i]
			if unfinished && shelljob.IsFinished(j) {
				continue
			}
			if strings.HasPrefix(j.Name, prefix) {
				out = append(out, j.Name+"\t#"+strconv.FormatInt(j.Status.Number, 10)+" "+shelljob.SummaryOf(j))
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
