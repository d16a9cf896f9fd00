// Package kubeutil holds small helpers for the Kubernetes API that more than
// one part of shelljob uses.
package kubeutil

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// Upsert creates obj, or updates it, after mutate has set what it holds
// (controllerutil.CreateOrUpdate). It tries again when another writer got
// there first: a conflicting update, or a create that lost the race.
func Upsert(ctx context.Context, c client.Client, obj client.Object, mutate func() error) error {
	raced := func(err error) bool { return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) }
	return retry.OnError(retry.DefaultRetry, raced, func() error {
		_, err := controllerutil.CreateOrUpdate(ctx, c, obj, mutate)
		return err
	})
}
