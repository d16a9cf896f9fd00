package streamapi

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/union"

	streamv1alpha1 "shelljob.dev/shelljob/api/stream/v1alpha1"
	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
)

// newAuthorizer is the API's authorizer: the job's owner first, then the
// API server's answer (delegated, a SubjectAccessReview), both asked
// about an attach as a create, whichever method carries its upgrade.
func newAuthorizer(j *jobs, delegated authorizer.Authorizer) (authorizer.Authorizer, error) {
	a, err := union.New(
		union.NamedAuthorizer{AuthorizerName: "shelljob.dev/owner", Authorizer: authorizer.AuthorizerFunc(ownerAuthorizer{jobs: j, delegated: delegated}.Authorize)},
		union.NamedAuthorizer{AuthorizerName: "shelljob.dev/delegated", Authorizer: delegated},
	)
	if err != nil {
		return nil, err
	}
	return authorizer.AuthorizerFunc(func(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
		if !isAttach(attrs) || attrs.GetVerb() == "create" {
			return a.Authorize(ctx, attrs)
		}
		decision, reason, err := a.Authorize(ctx, asCreate(attrs))
		if decision != authorizer.DecisionAllow && reason == "" {
			// The refusal names the request's own verb.
			reason = "an attach needs create on shelljobs/attach, whichever method carries it"
		}
		return decision, reason, err
	}), nil
}

// isAttach tells whether attrs ask for a job's attach. It is authorized
// as a create: an attach takes a terminal, which a get must not give.
// WebSocket upgrades come as GETs (RFC 6455), SPDY ones as POSTs;
// Kubernetes checks the GET of pods/exec and pods/attach for create too
// (AuthorizePodWebsocketUpgradeCreatePermission).
func isAttach(attrs authorizer.Attributes) bool {
	return isJobSubresource(attrs) && attrs.GetSubresource() == streamv1alpha1.SubresourceAttach
}

// asCreate is the resource request attrs with the verb create.
func asCreate(attrs authorizer.Attributes) authorizer.AttributesRecord {
	return authorizer.AttributesRecord{
		User: attrs.GetUser(), Verb: "create", Namespace: attrs.GetNamespace(),
		APIGroup: attrs.GetAPIGroup(), APIVersion: attrs.GetAPIVersion(),
		Resource: attrs.GetResource(), Subresource: attrs.GetSubresource(), Name: attrs.GetName(),
		ResourceRequest: true, Path: attrs.GetPath(),
	}
}

// isJobSubresource tells whether attrs ask for a subresource of a job of
// this API.
func isJobSubresource(attrs authorizer.Attributes) bool {
	return attrs.IsResourceRequest() && attrs.GetAPIGroup() == streamv1alpha1.GroupName &&
		attrs.GetResource() == streamv1alpha1.Resource && attrs.GetSubresource() != "" && attrs.GetName() != ""
}

// ownerAuthorizer allows a job's subresources to the person who created it
// (owner), while they may still create ShellJobs in its namespace, as the
// API server tells. It has no opinion on anything else.
type ownerAuthorizer struct {
	jobs      *jobs
	delegated authorizer.Authorizer
}

func (o ownerAuthorizer) Authorize(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	if !isJobSubresource(attrs) || attrs.GetUser() == nil {
		return authorizer.DecisionNoOpinion, "", nil
	}
	user := attrs.GetUser().GetName()
	sj, err := o.jobs.get(ctx, types.NamespacedName{Namespace: attrs.GetNamespace(), Name: attrs.GetName()})
	if err != nil || user == "" || owner(sj) != user {
		// A job not found is left to the delegated authorizer, so that a
		// caller who may read any job learns it is not there.
		return authorizer.DecisionNoOpinion, "", nil
	}
	create := authorizer.AttributesRecord{
		User: attrs.GetUser(), Verb: "create", Namespace: attrs.GetNamespace(),
		APIGroup: shellv1alpha1.GroupVersion.Group, APIVersion: shellv1alpha1.GroupVersion.Version,
		Resource: streamv1alpha1.Resource, ResourceRequest: true,
	}
	decision, _, err := o.delegated.Authorize(ctx, create)
	if err != nil || decision != authorizer.DecisionAllow {
		return authorizer.DecisionNoOpinion, "", err
	}
	return authorizer.DecisionAllow, fmt.Sprintf("%s owns shelljob %s and may create shelljobs in namespace %s", user, sj.Name, sj.Namespace), nil
}

// owner is the Kubernetes user who created the job, as the origin admission
// policy vouches for it: the origin's user of a job from the CLI, or of a
// job from Telegram that names its Telegram user apart (the bot created it
// impersonating its sender's identity). "" for any other job: a Telegram
// job of an older bot names a Telegram user id in its user, which must
// never pass for a Kubernetes user of that name, and is read with the
// subresource's own right alone.
func owner(sj *shellv1alpha1.ShellJob) string {
	switch o := sj.Spec.Origin; {
	case o.Source == shellv1alpha1.OriginCLI:
		return o.User
	case o.Source == shellv1alpha1.OriginTelegram && o.TelegramUser != 0:
		return o.User
	}
	return ""
}
