package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestNamedJob checks how a job named on the command line is read: through
// shelljobs, else, refused there alone, through myshelljobs; refused by
// both, with both refusals.
func TestNamedJob(t *testing.T) {
	forbidden := func(resource string) error {
		return apierrors.NewForbidden(schema.GroupResource{Group: "stream.shelljob.dev", Resource: resource}, "j", nil)
	}
	cases := map[string]struct {
		anyJob, own *fakeStream
		want        string
		wantErr     func(error) bool
		saying      []string
	}{
		"any job":                  {anyJob: &fakeStream{Output: "any\n"}, own: &fakeStream{Output: "own\n"}, want: "any\n"},
		"refused any, own":         {anyJob: &fakeStream{FollowErr: forbidden("shelljobs")}, own: &fakeStream{Output: "own\n"}, want: "own\n"},
		"refused by both":          {anyJob: &fakeStream{FollowErr: forbidden("shelljobs")}, own: &fakeStream{FollowErr: forbidden("myshelljobs")}, wantErr: apierrors.IsForbidden, saying: []string{`shelljobs.stream.shelljob.dev "j" is forbidden`, `myshelljobs.stream.shelljob.dev "j" is forbidden`}},
		"not found is not retried": {anyJob: &fakeStream{FollowErr: apierrors.NewNotFound(schema.GroupResource{Resource: "shelljobs"}, "j")}, own: &fakeStream{Output: "own\n"}, wantErr: apierrors.IsNotFound},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			_, err := namedJob{anyJob: tc.anyJob, own: tc.own}.follow(context.Background(), "j", 0, &out)
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatalf("follow: %v", err)
			case tc.wantErr != nil && !tc.wantErr(err):
				t.Fatalf("follow: %v, want the other error", err)
			}
			for _, s := range tc.saying {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("follow: %v, want it saying %q", err, s)
				}
			}
			if out.String() != tc.want {
				t.Errorf("output = %q, want %q", out.String(), tc.want)
			}
		})
	}
}
