package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// namedJob reads a job named on the command line: through AnyStream,
// which reads any job for whoever may get shelljobs/log, and, refused
// there, through Stream, which reads the caller's own. Refused by both,
// it returns both refusals, each naming its resource.
type namedJob struct{ anyJob, own Stream }

// follow is Stream.Follow of the job as the caller may read it.
func (n namedJob) follow(ctx context.Context, job string, offset int64, w io.Writer) (int64, error) {
	reached, err := n.anyJob.Follow(ctx, job, offset, w)
	if !apierrors.IsForbidden(err) {
		return reached, err
	}
	reached, ownErr := n.own.Follow(ctx, job, offset, w)
	if apierrors.IsForbidden(ownErr) {
		return reached, fmt.Errorf("the API server refuses %s's output: %w", job, errors.Join(err, ownErr))
	}
	return reached, ownErr
}
