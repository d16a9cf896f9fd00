package bot

import (
	"context"
	"time"

	"github.com/go-logr/logr"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/shelljob"
)

// OfflinePoll is how often GoOffline looks at the jobs.
const OfflinePoll = 500 * time.Millisecond

// OfflineCluster is what GoOffline asks of the cluster.
type OfflineCluster interface {
	JobLister
	JobStopper
}

// GoOffline stops every unfinished job of the bot with reason Shutdown and
// waits up to ShutdownTimeout for the running bot to deliver them all: the
// finals say that the bot is going offline. The chart's pre-delete hook
// runs it, so that helm uninstall gives the chats their finals while the
// bot and the operator are still there. A bot's own SIGTERM stops nothing:
// it is a restart, and the next bot delivers the jobs. It returns how
// many jobs were left undelivered.
func GoOffline(ctx context.Context, c OfflineCluster, log logr.Logger) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, ShutdownTimeout)
	defer cancel()
	left := 0
	for {
		all, err := c.List(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return left, nil
			}
			return left, err
		}
		left = 0
		for _, sj := range all {
			if _, done := sj.Annotations[shellv1alpha1.AnnotationDelivered]; done {
				continue
			}
			left++
			if shelljob.DecideStop(&sj) == shelljob.StopAlreadyEnded || shelljob.DecideStop(&sj) == shelljob.StopAlreadyRequested {
				continue // no call for a job that needs none
			}
			if _, _, err := c.Stop(ctx, sj.Name, shellv1alpha1.StopReasonShutdown); err != nil {
				log.Error(err, "Could not stop a job", "job", sj.Name)
				continue
			}
			log.Info("Stopped a job: the bot is going offline", "job", sj.Name)
		}
		if left == 0 {
			return 0, nil
		}
		select {
		case <-time.After(OfflinePoll):
		case <-ctx.Done():
			log.Info("Jobs not delivered before the shutdown timeout", "jobs", left)
			return left, nil
		}
	}
}
