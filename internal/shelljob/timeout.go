package shelljob

import (
	"fmt"
	"time"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
)

// ActivityRecheck is how soon an idle timeout is looked at again while the
// worker's stream has not reported the job yet.
const ActivityRecheck = 2 * time.Second

// Activity is what the worker's events stream reported of a running job,
// for its timeouts.
type Activity struct {
	// Reported: the stream has reported the job; only then does
	// LastOutput say anything.
	Reported bool
	// StartedAt is when the command started, zero when the stream did not
	// say (the job's status.startTime stands in).
	StartedAt time.Time
	// LastOutput is when the command last wrote; zero if it never did.
	LastOutput time.Time
}

// Timeout tells whether a running job ran past its deadline
// (spec.activeDeadlineSeconds) or sat idle, writing nothing, too long
// (spec.idleTimeoutSeconds): why, as a clause ("ran past its deadline of
// 5 s"); otherwise "" and how soon to look again (0: never).
func Timeout(j *shellv1alpha1.ShellJob, a Activity, now time.Time) (why string, next time.Duration) {
	start := a.StartedAt
	if start.IsZero() && j.Status.StartTime != nil {
		start = j.Status.StartTime.Time
	}
	soonest := func(d time.Duration) {
		if next == 0 || d < next {
			next = d
		}
	}
	if s := j.Spec.ActiveDeadlineSeconds; s != nil {
		end := start.Add(time.Duration(*s) * time.Second)
		if !now.Before(end) {
			return fmt.Sprintf("ran past its deadline of %d s", *s), 0
		}
		soonest(end.Sub(now))
	}
	if s := j.Spec.IdleTimeoutSeconds; s != nil {
		if !a.Reported {
			// Only the worker's stream knows when the job last wrote.
			soonest(ActivityRecheck)
		} else {
			last := a.LastOutput
			if last.IsZero() {
				last = start
			}
			end := last.Add(time.Duration(*s) * time.Second)
			if !now.Before(end) {
				return fmt.Sprintf("wrote no output for %d s", *s), 0
			}
			soonest(end.Sub(now))
		}
	}
	return "", next
}
