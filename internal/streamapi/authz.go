package streamapi

import (
	"context"
	"fmt"

	"k8s.io/apiserver/pkg/authorization/authorizer"

	streamv1alpha1 "shelljob.dev/shelljob/api/stream/v1alpha1"
)

// newAuthorizer is the API's authorizer: the API server's answer
// (delegated, a SubjectAccessReview), asked about an attach as a create,
// whichever method carries its upgrade. It is RBAC's word alone, as the
// API server's own before it proxied the request; the owner rule of
// myshelljobs is the storage's (ownerRule), which sees the job.
func newAuthorizer(delegated authorizer.Authorizer) authorizer.Authorizer {
	return authorizer.AuthorizerFunc(func(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
		if !isAttach(attrs) || attrs.GetVerb() == "create" {
			return delegated.Authorize(ctx, attrs)
		}
		decision, reason, err := delegated.Authorize(ctx, asCreate(attrs))
		if decision != authorizer.DecisionAllow && reason == "" {
			// The refusal names the request's own verb.
			reason = fmt.Sprintf("an attach needs create on %s/attach, whichever method carries it", attrs.GetResource())
		}
		return decision, reason, err
	})
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
// this API, through either resource.
func isJobSubresource(attrs authorizer.Attributes) bool {
	return attrs.IsResourceRequest() && attrs.GetAPIGroup() == streamv1alpha1.GroupName &&
		(attrs.GetResource() == streamv1alpha1.Resource || attrs.GetResource() == streamv1alpha1.OwnResource) &&
		attrs.GetSubresource() != "" && attrs.GetName() != ""
}
