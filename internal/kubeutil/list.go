package kubeutil

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
)

// DefaultPageSize is how many jobs ListShellJobs asks for at a time when
// told no size.
const DefaultPageSize = 500

// ListShellJobs lists the ShellJobs that opts select from the API server,
// pageSize at a time (DefaultPageSize if 0), so that no response holds
// every job with its command of up to 64 KiB. keep, if not nil, tells which
// jobs to keep as the pages come in.
func ListShellJobs(ctx context.Context, c client.Reader, pageSize int64, keep func(*shellv1alpha1.ShellJob) bool,
	opts ...client.ListOption) ([]shellv1alpha1.ShellJob, error) {
	if pageSize <= 0 {
		pageSize = DefaultPageSize
	}
	var out []shellv1alpha1.ShellJob
	next := ""
	for {
		var page shellv1alpha1.ShellJobList
		pageOpts := append(append([]client.ListOption(nil), opts...), client.Limit(pageSize), client.Continue(next))
		if err := c.List(ctx, &page, pageOpts...); err != nil {
			return nil, err
		}
		for i := range page.Items {
			if keep == nil || keep(&page.Items[i]) {
				out = append(out, page.Items[i])
			}
		}
		if next = page.Continue; next == "" {
			return out, nil
		}
	}
}
