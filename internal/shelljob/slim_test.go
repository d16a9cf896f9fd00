package shelljob

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

func TestSlim(t *testing.T) {
	applied := map[string]string{corev1.LastAppliedConfigAnnotation: `{"spec":{"command":"sleep 100"}}`, "keep": "me"}
	managed := []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}}
	cases := map[string]struct {
		job, want *shellv1alpha1.ShellJob
	}{
		"new job: summary from the command": {
			job:  utiltesting.MakeShellJob("j", "ns").Command("sleep 100\necho done").Obj(),
			want: withSummary(utiltesting.MakeShellJob("j", "ns").Command("").Obj(), "sleep 100…"),
		},
		"written summary kept": {
			job:  withSummary(utiltesting.MakeShellJob("j", "ns").Command("sleep 100").Obj(), "as written"),
			want: withSummary(utiltesting.MakeShellJob("j", "ns").Command("").Obj(), "as written"),
		},
		"managed fields and last-applied dropped, other annotations kept": {
			job: func() *shellv1alpha1.ShellJob {
				j := utiltesting.MakeShellJob("j", "ns").Command("ls").Obj()
				j.ManagedFields, j.Annotations = managed, applied
				return j
			}(),
			want: func() *shellv1alpha1.ShellJob {
				j := withSummary(utiltesting.MakeShellJob("j", "ns").Command("").Obj(), "ls")
				j.Annotations = map[string]string{"keep": "me"}
				return j
			}(),
		},
		"slim already": {
			job:  withSummary(utiltesting.MakeShellJob("j", "ns").Command("").Obj(), "ls"),
			want: withSummary(utiltesting.MakeShellJob("j", "ns").Command("").Obj(), "ls"),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := SlimTransform(tc.job)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("SlimTransform (-want +got):\n%s", diff)
			}
		})
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", ManagedFields: managed}}
	if got, _ := SlimTransform(pod); got.(*corev1.Pod).ManagedFields == nil {
		t.Error("SlimTransform changed a Pod")
	}
}

func withSummary(j *shellv1alpha1.ShellJob, s string) *shellv1alpha1.ShellJob {
	j.Status.Summary = s
	return j
}
