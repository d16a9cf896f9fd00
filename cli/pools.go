package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"
)

// NewPoolsCmd returns the pools command.
func NewPoolsCmd(o *Options) *cobra.Command {
	return &cobra.Command{
		Use:   "pools",
		Short: "List the pools with their ready, busy and queued counts",
		Long: `Lists the ShellPools of the namespace: ready workers of the current revision
out of the pool's size, workers running at least one job, and jobs waiting
for a worker.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SilenceUsage = true
			return runPools(cmd.Context(), o)
		},
	}
}

func runPools(ctx context.Context, o *Options) error {
	c, err := o.Cluster()
	if err != nil {
		return err
	}
	list, err := c.Pools.List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list shellpools: %w", err)
	}
	if len(list.Items) == 0 {
		fmt.Fprintf(o.ErrOut, "No resources found in %s namespace.\n", c.Namespace)
		return nil
	}
	w := printers.GetNewTabWriter(o.Out)
	fmt.Fprintln(w, "NAME\tREADY\tBUSY\tQUEUED\tAGE")
	now := o.Clock.Now()
	for _, p := range list.Items {
		ready := p.Status.Ready
		if ready == "" {
			ready = fmt.Sprintf("%d/%d", p.Status.ReadyReplicas, p.Spec.Replicas)
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s\n", p.Name, ready, p.Status.BusyReplicas, p.Status.QueuedJobs, age(now, p.CreationTimestamp))
	}
	return w.Flush()
}
