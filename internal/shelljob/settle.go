package shelljob

import (
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
)

// SettleMargin is how far off a job's expiry must be for the job to
// settle: one that expires sooner stays in the operator's cache, which
// deletes it on time, rather than wait for the next sweep of the settled
// jobs.
const SettleMargin = 5 * time.Minute

// Never is LabelExpires' value on a settled job that is kept for ever.
const Never = "never"

// Settles tells whether a finished job may settle (LabelExpires), and
// when it then expires: the zero time for a job kept for ever (a negative
// ttl). Nothing may wait for it: its delivery mark is set (and the worker
// told, which the caller does first), or it never ran on a worker and no
// reader has a final to deliver. A job being deleted and one that expires
// within SettleMargin do not settle.
func Settles(j *shellv1alpha1.ShellJob, now time.Time, ttl, grace time.Duration) (time.Time, bool) {
	if !IsFinished(j) || j.DeletionTimestamp != nil {
		return time.Time{}, false
	}
	if _, delivered := Delivered(j); !delivered && (j.Status.Pod != "" || AwaitsDelivery(j)) {
		return time.Time{}, false
	}
	expiry, ok := Expiry(j, ttl, grace)
	switch {
	case !ok:
		return time.Time{}, false
	case ttl < 0:
		return time.Time{}, true
	case expiry.Sub(now) < SettleMargin:
		return time.Time{}, false
	}
	return expiry, true
}

// Settle labels j settled, to expire at expiry (never, if it is zero),
// with its number.
func Settle(j *shellv1alpha1.ShellJob, expiry time.Time) {
	if j.Labels == nil {
		j.Labels = map[string]string{}
	}
	j.Labels[shellv1alpha1.LabelExpires] = Never
	if !expiry.IsZero() {
		j.Labels[shellv1alpha1.LabelExpires] = strconv.FormatInt(expiry.Unix(), 10)
	}
	if j.Status.Number != 0 {
		j.Labels[shellv1alpha1.LabelNumber] = strconv.FormatInt(j.Status.Number, 10)
	}
}

// SettledExpiry is when a settled job expires, from its labels; false for
// a job that is not settled, is kept for ever, or whose label does not
// parse.
func SettledExpiry(o metav1.Object) (time.Time, bool) {
	v, ok := o.GetLabels()[shellv1alpha1.LabelExpires]
	if !ok {
		return time.Time{}, false
	}
	sec, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(sec, 0), true
}

// SettledNumber is a settled job's number, from its labels; 0 when it has
// none.
func SettledNumber(o metav1.Object) int64 {
	n, err := strconv.ParseInt(o.GetLabels()[shellv1alpha1.LabelNumber], 10, 64)
	if err != nil {
		return 0
	}
	return n
}
