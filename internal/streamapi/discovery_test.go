package streamapi_test

import (
	"context"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	streamv1alpha1 "shelljob.dev/shelljob/api/stream/v1alpha1"
)

// TestDiscovery checks what the group lists: each subresource of both
// resources, shelljobs and myshelljobs, with its verbs, and their
// parents with none.
func TestDiscovery(t *testing.T) {
	f := setup(t)
	var list metav1.APIResourceList
	if err := f.as(own(bob)).Get().AbsPath("/apis", streamv1alpha1.GroupVersion.String()).Do(context.Background()).Into(&list); err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, r := range list.APIResources {
		if !r.Namespaced || r.Kind != "ShellJob" {
			t.Errorf("resource %s: namespaced %v, kind %s; want a namespaced ShellJob's", r.Name, r.Namespaced, r.Kind)
		}
		got[r.Name] = slices.Sorted(slices.Values(r.Verbs))
	}
	want := map[string][]string{
		"shelljobs":        nil,
		"shelljobs/log":    {"get"},
		"shelljobs/files":  {"create", "get", "update"},
		"shelljobs/attach": {"create", "get"},

		"myshelljobs":        nil,
		"myshelljobs/log":    {"get"},
		"myshelljobs/files":  {"create", "get", "update"},
		"myshelljobs/attach": {"create", "get"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("discovery of %s (-want +got):\n%s", streamv1alpha1.GroupVersion, diff)
	}
}
