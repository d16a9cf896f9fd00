package streamapi

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"

	streamv1alpha1 "shelljob.dev/shelljob/api/stream/v1alpha1"
	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
)

// newStorage is the group version's storage map: the subresources, and
// their parent, which has no verb (the ShellJobs themselves are
// shell.shelljob.dev's).
func newStorage(s streams, exec *execProxy) map[string]rest.Storage {
	sub := func(name string) string { return streamv1alpha1.Resource + "/" + name }
	return map[string]rest.Storage{
		streamv1alpha1.Resource:               &jobsREST{},
		sub(streamv1alpha1.SubresourceLog):    &LogREST{streams: s},
		sub(streamv1alpha1.SubresourceFiles):  &FilesREST{streams: s},
		sub(streamv1alpha1.SubresourceAttach): &AttachREST{streams: s, exec: exec},
	}
}

// jobsREST is the parent of the subresources, which k8s.io/apiserver's
// installer needs, without a verb: discovery lists it with none, so that
// kubectl never takes it for the ShellJobs (and the group's priority is
// below the CRD's).
type jobsREST struct{}

var (
	_ rest.Scoper               = (*jobsREST)(nil)
	_ rest.SingularNameProvider = (*jobsREST)(nil)
)

func (*jobsREST) New() runtime.Object     { return &shellv1alpha1.ShellJob{} }
func (*jobsREST) Destroy()                {}
func (*jobsREST) NamespaceScoped() bool   { return true }
func (*jobsREST) GetSingularName() string { return "shelljob" }
