package streamapi

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/request"

	streamv1alpha1 "shelljob.dev/shelljob/api/stream/v1alpha1"
	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/shelljob"
)

// ownResource is the resource of the owner rule, as a refusal names it.
var ownResource = schema.GroupResource{Group: streamv1alpha1.GroupName, Resource: streamv1alpha1.OwnResource}

// ownerRule is what myshelljobs asks beyond RBAC, which let the request
// through on that resource: the caller owns the job (shelljob.
// KubernetesUser: a CLI job they created, or a Telegram job the bot
// created impersonating them, which names its sender's Telegram user
// beside, as the origin admission policy makes every new one; an older
// bot's, which names none, is nobody's), and may still create ShellJobs in its
// namespace, as the API server tells (a SubjectAccessReview), so that a
// user whose right is revoked reads their old jobs no more. Anything else
// is Forbidden, with nothing of the job's output. shelljobs asks nothing
// beyond RBAC.
type ownerRule struct {
	jobs *jobs
	// authz is the API server's authorizer (delegated).
	authz authorizer.Authorizer
}

// check allows a request for job key when it came through shelljobs, or
// when its caller owns the job; it returns the refusal otherwise, or
// NotFound for a job that is not there.
func (o ownerRule) check(ctx context.Context, key types.NamespacedName) error {
	info, ok := request.RequestInfoFrom(ctx)
	if !ok {
		return apierrors.NewInternalError(fmt.Errorf("shelljob %s: a request with no request info", key.Name))
	}
	if info.Resource != streamv1alpha1.OwnResource {
		return nil
	}
	u, ok := request.UserFrom(ctx)
	if !ok || u.GetName() == "" {
		return apierrors.NewForbidden(ownResource, key.Name, fmt.Errorf("an anonymous caller owns no shelljob"))
	}
	user := u.GetName()
	sj, err := o.jobs.get(ctx, key)
	if err != nil {
		return err
	}
	switch owner := shelljob.KubernetesUser(sj); {
	case sj.Spec.Origin.Source == shellv1alpha1.OriginTelegram && sj.Spec.Origin.TelegramUser == 0:
		return apierrors.NewForbidden(ownResource, key.Name, fmt.Errorf(
			"shelljob %s is not %s's: an older bot's Telegram job, which names a Telegram user and no Kubernetes one, is nobody's own; reading it needs %s on shelljobs/%s",
			key.Name, user, verbOf(info), info.Subresource))
	case owner != user:
		return apierrors.NewForbidden(ownResource, key.Name, fmt.Errorf(
			"shelljob %s is not %s's: reading or attaching to another's job needs %s on shelljobs/%s",
			key.Name, user, verbOf(info), info.Subresource))
	}
	create := authorizer.AttributesRecord{
		User: u, Verb: "create", Namespace: key.Namespace,
		APIGroup: shellv1alpha1.GroupVersion.Group, APIVersion: shellv1alpha1.GroupVersion.Version,
		Resource: streamv1alpha1.Resource, ResourceRequest: true,
	}
	decision, _, err := o.authz.Authorize(ctx, create)
	switch {
	case err != nil:
		return apierrors.NewInternalError(fmt.Errorf("whether %s may create shelljobs in namespace %s: %w", user, key.Namespace, err))
	case decision != authorizer.DecisionAllow:
		return apierrors.NewForbidden(ownResource, key.Name, fmt.Errorf(
			"shelljob %s is %s's, who may no longer create shelljobs in namespace %s: an owner reads their jobs while they may",
			key.Name, user, key.Namespace))
	}
	return nil
}

// verbOf is the RBAC verb of the request's subresource on shelljobs: an
// attach's is create, whichever method carries it.
func verbOf(info *request.RequestInfo) string {
	if info.Subresource == streamv1alpha1.SubresourceAttach {
		return "create"
	}
	return info.Verb
}
