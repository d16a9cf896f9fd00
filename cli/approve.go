package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/shelljob"
)

// DecideOptions are the options of the approve and deny commands.
type DecideOptions struct {
	*Options
	Decision shellv1alpha1.ApprovalDecision
	Jobs     []string
}

// NewApproveCmd returns the approve command.
func NewApproveCmd(o *Options) *cobra.Command {
	return newDecideCmd(o, shellv1alpha1.ApprovalApproved, "approve", "Approve jobs that wait for approval, so that they run",
		`Approves jobs, named or numbered (N or #N), that wait for approval on a pool
that requires one (its spec.approval): each then runs as any other job. The
API server admits the decision only from a person allowed to approve on the
job's pool who is not its author; its refusal is printed as it is.`)
}

// NewDenyCmd returns the deny command.
func NewDenyCmd(o *Options) *cobra.Command {
	return newDecideCmd(o, shellv1alpha1.ApprovalDenied, "deny", "Deny jobs that wait for approval: they never run",
		`Denies jobs, named or numbered (N or #N), that wait for approval on a pool
that requires one: each ends Denied and never runs. The API server admits the
decision only from a person allowed to approve on the job's pool who is not
its author; its refusal is printed as it is.`)
}

func newDecideCmd(o *Options, d shellv1alpha1.ApprovalDecision, use, short, long string) *cobra.Command {
	do := &DecideOptions{Options: o, Decision: d}
	return &cobra.Command{
		Use:                   use + " JOB...",
		Short:                 short,
		Long:                  long,
		Example:               fmt.Sprintf("  kubectl shelljob %s 12\n  kubectl shelljob %s cli-x7k2p", use, use),
		DisableFlagsInUseLine: true,
		Args:                  cobra.MinimumNArgs(1),
		ValidArgsFunction:     completeJobs(o, true),
		RunE: func(cmd *cobra.Command, args []string) error {
			cmd.SilenceUsage = true
			do.Jobs = args
			return do.Run(cmd.Context())
		},
	}
}

// Run records the decision on each job, and prints a line for each.
func (d *DecideOptions) Run(ctx context.Context) error {
	c, err := d.Cluster()
	if err != nil {
		return err
	}
	if c.WhoAmI == nil {
		return errors.New("cannot tell who you are to the cluster, which the decision must name")
	}
	by, err := c.WhoAmI(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, ref := range d.Jobs {
		j, err := c.findJob(ctx, ref)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := c.requiresApproval(ctx, j); err != nil {
			errs = append(errs, err)
			continue
		}
		out, now, err := shelljob.Decide(ctx, jobPatcher{c.Jobs}, j.Name, shellv1alpha1.ShellJobApproval{Decision: d.Decision, By: by})
		if err != nil {
			// The API server's refusal, as it is.
			errs = append(errs, err)
			continue
		}
		if now == nil {
			now = j
		}
		fmt.Fprintln(d.Out, out.Text(now, j.Status.Number, d.Decision))
	}
	return errors.Join(errs...)
}

// requiresApproval refuses a decision on a job of a pool that requires no
// approval, where it would change nothing. A pool the caller may not read
// is left for the API server to judge.
func (c *Cluster) requiresApproval(ctx context.Context, j *shellv1alpha1.ShellJob) error {
	if shelljob.IsAwaitingApproval(j) || j.Spec.Approval != nil || shelljob.IsFinished(j) {
		return nil
	}
	pool, err := c.Pools.Get(ctx, shelljob.Pool(j), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("#%d: its pool %s does not exist", j.Status.Number, shelljob.Pool(j))
	case err != nil:
		return nil
	case pool.Spec.Approval == nil:
		return fmt.Errorf("#%d does not wait for approval: pool %s requires none", j.Status.Number, pool.Name)
	}
	return nil
}
