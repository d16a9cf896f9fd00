package cli

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/spf13/cobra"

	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/shelljob"
	"shelljob.dev/shelljob/internal/texts"
)

// StopOptions are the options of the stop command.
type StopOptions struct {
	*Options
	All  bool
	Jobs []string
}

// NewStopCmd returns the stop command.
func NewStopCmd(o *Options) *cobra.Command {
	s := &StopOptions{Options: o}
	cmd := &cobra.Command{
		Use:   "stop (JOB... | --all)",
		Short: "Stop jobs, as the chat's .k does",
		Long: `Stops jobs, named or numbered (N or #N), or every queued or running job of the
namespace with --all. A queued job never runs; a running one gets
` + agentapi.StopLadderText() + `, on its process group until the group is
empty. It answers as the chat's .k does.`,
		Example: `  kubectl shelljob stop 12
  kubectl shelljob stop cli-x7k2p
  kubectl shelljob stop --all`,
		DisableFlagsInUseLine: true,
		ValidArgsFunction:     completeJobs(o, true),
		RunE: func(cmd *cobra.Command, args []string) error {
			cmd.SilenceUsage = true
			switch {
			case s.All && len(args) > 0:
				return errors.New("give jobs or --all, not both")
			case !s.All && len(args) == 0:
				return errors.New("give the jobs to stop, or --all")
			}
			s.Jobs = args
			return s.Run(cmd.Context())
		},
	}
	cmd.Flags().BoolVar(&s.All, "all", false, "stop every queued or running job of the namespace")
	return cmd
}

// Run stops the jobs and prints a line for each.
func (s *StopOptions) Run(ctx context.Context) error {
	c, err := s.Cluster()
	if err != nil {
		return err
	}
	if s.All {
		jobs, err := c.listJobs(ctx, nil)
		if err != nil {
			return fmt.Errorf("list shelljobs: %w", err)
		}
		sort.SliceStable(jobs, func(a, b int) bool { return jobs[a].Status.Number < jobs[b].Status.Number })
		found := false
		for i := range jobs {
			j := &jobs[i]
			if shelljob.IsFinished(j) {
				continue
			}
			found = true
			out, err := c.stopJob(ctx, j.Name)
			if err != nil {
				return err
			}
			fmt.Fprintln(s.Out, out.Text(j.Status.Number))
		}
		if !found {
			fmt.Fprintln(s.Out, texts.NoRunning)
		}
		return nil
	}
	var errs []error
	for _, ref := range s.Jobs {
		j, err := c.findJob(ctx, ref)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out, err := c.stopJob(ctx, j.Name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		fmt.Fprintln(s.Out, out.Text(j.Status.Number))
	}
	return errors.Join(errs...)
}
