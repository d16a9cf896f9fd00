package kubeutil

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// IsPassing tells whether an error of an API call may go away by itself,
// so that the call is worth trying again, or may even have been carried
// out (a timeout): not a refusal of the request as it was, nor the
// caller's own cancel.
func IsPassing(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	switch {
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err), apierrors.IsInvalid(err),
		apierrors.IsBadRequest(err), apierrors.IsMethodNotSupported(err), apierrors.IsNotAcceptable(err),
		apierrors.IsUnsupportedMediaType(err), apierrors.IsRequestEntityTooLargeError(err),
		apierrors.IsAlreadyExists(err), apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return false
	}
	return true
}
