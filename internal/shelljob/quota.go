package shelljob

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
)

// QuotaResource is the resource of a ResourceQuota on the count of
// ShellJobs in a namespace, as the chart sets it (jobQuota).
var QuotaResource = corev1.ResourceName("count/shelljobs." + shellv1alpha1.GroupVersion.Group)

// QuotaFullError is a create that the API server refused because a
// ResourceQuota of the namespace is full.
type QuotaFullError struct {
	// Quota is the ResourceQuota's name.
	Quota string
	// Used and Limit count the ShellJobs of the namespace under that quota,
	// -1 when it does not limit them (it is full of something else).
	Used, Limit int64
	// Err is the API server's error.
	Err error
}

func (e *QuotaFullError) Error() string {
	if e.Limit < 0 {
		return fmt.Sprintf("the namespace's ResourceQuota %s is full", e.Quota)
	}
	return fmt.Sprintf("the ShellJob quota is full: %d used of %d (ResourceQuota %s); finished jobs count until they expire or are deleted",
		e.Used, e.Limit, e.Quota)
}

func (e *QuotaFullError) Unwrap() error { return e.Err }

// exceededQuota is the ResourceQuota admission plugin's message
// (k8s.io/apiserver, plugin/resourcequota): "exceeded quota: NAME,
// requested: LIST, used: LIST, limited: LIST", each LIST resource=quantity
// pairs joined by commas.
var exceededQuota = regexp.MustCompile(`exceeded quota: ([^,]+), requested: .*?, used: (.*?), limited: (.*)$`)

// QuotaFull tells whether err, from a create, is the API server's refusal
// under a full ResourceQuota, and returns it as a QuotaFullError that says
// so in words; other errors are not.
func QuotaFull(err error) (*QuotaFullError, bool) {
	var status apierrors.APIStatus
	if !apierrors.IsForbidden(err) || !errors.As(err, &status) {
		return nil, false
	}
	m := exceededQuota.FindStringSubmatch(status.Status().Message)
	if m == nil {
		return nil, false
	}
	q := &QuotaFullError{Quota: m[1], Used: quantity(m[2]), Limit: quantity(m[3]), Err: err}
	if q.Used < 0 || q.Limit < 0 {
		q.Used, q.Limit = -1, -1
	}
	return q, true
}

// quantity is the count of QuotaResource in a LIST of the message, -1 if
// it is not there. Counts are quantities there: 10000 is "10k".
func quantity(list string) int64 {
	for pair := range strings.SplitSeq(list, ",") {
		name, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok || corev1.ResourceName(name) != QuotaResource {
			continue
		}
		if n, err := resource.ParseQuantity(v); err == nil {
			return n.Value()
		}
	}
	return -1
}

// QuotaPending tells whether err, from a create, is the refusal of an API
// server whose ResourceQuota controller has not counted the namespace yet
// ("status unknown for quota", as just after the chart installs its
// quota): nothing was made, and the same create goes through once it has.
func QuotaPending(err error) bool {
	var status apierrors.APIStatus
	return apierrors.IsForbidden(err) && errors.As(err, &status) &&
		strings.Contains(status.Status().Message, "status unknown for quota")
}

// QuotaPendingRetry and QuotaPendingWait bound CreateQuotaCounted's
// tries. The quota controller counts a new quota within seconds on a quiet
// cluster, but it watches a new kind (count/shelljobs, just after the
// chart installs its CRDs) only from its next discovery pass, and a loaded
// control plane was seen taking over a minute: a first command right
// after an install waits for it rather than fails.
const (
	QuotaPendingRetry = 500 * time.Millisecond
	QuotaPendingWait  = 2 * time.Minute
)

// CreateQuotaCounted calls create, and calls it again while the API
// server refuses it for a quota it has not counted yet (QuotaPending), for
// up to QuotaPendingWait, QuotaPendingRetry apart, or until ctx ends.
func CreateQuotaCounted(ctx context.Context, create func() error) error {
	deadline := time.Now().Add(QuotaPendingWait)
	err := create()
	for QuotaPending(err) && time.Now().Before(deadline) {
		select {
		case <-time.After(QuotaPendingRetry):
		case <-ctx.Done():
			return err
		}
		err = create()
	}
	return err
}
