package shelljob

import (
	"errors"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// policyDenied ends the API server's preamble to the message of a
// ValidatingAdmissionPolicy that refused a request: `shelljobs... is
// forbidden: ValidatingAdmissionPolicy 'P' with binding 'B' denied
// request: MESSAGE`.
const policyDenied = "denied request: "

// Refusal is the message with which an admission policy refused a request
// ("You may not run commands on pool prod."), without the API server's
// preamble, for the chat to show; false for any other error. The terminal
// prints the API's whole refusal.
func Refusal(err error) (string, bool) {
	var status apierrors.APIStatus
	if err == nil || !errors.As(err, &status) || !(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)) {
		return "", false
	}
	_, msg, ok := strings.Cut(status.Status().Message, policyDenied)
	if !ok || msg == "" {
		return "", false
	}
	return msg, true
}
