package streamapi

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	streamv1alpha1 "shelljob.dev/shelljob/api/stream/v1alpha1"
	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
)

var (
	// scheme holds the group's options and, as its kind, the ShellJob:
	// the object whose subresources these are, registered in the group as
	// KubeVirt registers its VirtualMachineInstance in
	// subresources.kubevirt.io.
	scheme = newScheme()
	codecs = serializer.NewCodecFactory(scheme)
)

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(streamv1alpha1.AddToScheme(s))
	s.AddKnownTypes(streamv1alpha1.GroupVersion, &shellv1alpha1.ShellJob{}, &shellv1alpha1.ShellJobList{})
	// What every API server answers with: statuses and discovery.
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	s.AddUnversionedTypes(schema.GroupVersion{Version: "v1"},
		&metav1.Status{}, &metav1.APIVersions{}, &metav1.APIGroupList{}, &metav1.APIGroup{}, &metav1.APIResourceList{})
	return s
}

// jobResource is the resource of the jobs this API reads, for the
// statuses that name one.
var jobResource = shellv1alpha1.GroupVersion.WithResource(streamv1alpha1.Resource).GroupResource()
