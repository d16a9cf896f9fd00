package streamapi

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"

	streamv1alpha1 "shelljob.dev/shelljob/api/stream/v1alpha1"
	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
)

// newStorage is the group version's storage map: the subresources under
// each of the two resources, shelljobs (any job, as RBAC allows) and
// myshelljobs (the caller's own, which the owner rule in streams.key
// checks), and their parents, which have no verb (the ShellJobs
// themselves are shell.shelljob.dev's).
func newStorage(s streams, exec *execProxy) map[string]rest.Storage {
	m := map[string]rest.Storage{}
	for resource, singular := range map[string]string{streamv1alpha1.Resource: "shelljob", streamv1alpha1.OwnResource: "myshelljob"} {
		m[resource] = &jobsREST{singular: singular}
		m[resource+"/"+streamv1alpha1.SubresourceLog] = &LogREST{streams: s}
		m[resource+"/"+streamv1alpha1.SubresourceFiles] = &FilesREST{streams: s}
		m[resource+"/"+streamv1alpha1.SubresourceAttach] = &AttachREST{streams: s, exec: exec}
	}
	return m
}

// jobsREST is the parent of the subresources, which k8s.io/apiserver's
// installer needs, without a verb: discovery lists it with none, so that
// kubectl never takes it for the ShellJobs (and the group's priority is
// below the CRD's).
type jobsREST struct{ singular string }

var (
	_ rest.Scoper               = (*jobsREST)(nil)
	_ rest.SingularNameProvider = (*jobsREST)(nil)
)

func (*jobsREST) New() runtime.Object       { return &shellv1alpha1.ShellJob{} }
func (*jobsREST) Destroy()                  {}
func (*jobsREST) NamespaceScoped() bool     { return true }
func (r *jobsREST) GetSingularName() string { return r.singular }
