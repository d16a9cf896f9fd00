package shelljob

import (
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestQuotaFull(t *testing.T) {
	jobs := schema.GroupResource{Group: "shell.shelljob.dev", Resource: "shelljobs"}
	forbidden := func(msg string) error {
		return fmt.Errorf("create shelljob: %w", apierrors.NewForbidden(jobs, "cli-x", errors.New(msg)))
	}
	cases := map[string]struct {
		err         error
		want        bool
		used, limit int64
		text        string
	}{
		"the chart's quota, as the admission plugin words it": {
			err:  forbidden("exceeded quota: shelljob-shelljobs, requested: count/shelljobs.shell.shelljob.dev=1, used: count/shelljobs.shell.shelljob.dev=10k, limited: count/shelljobs.shell.shelljob.dev=10k"),
			want: true, used: 10000, limit: 10000,
			text: "the ShellJob quota is full: 10000 used of 10000 (ResourceQuota shelljob-shelljobs); finished jobs count until they expire or are deleted",
		},
		"among other resources": {
			err:  forbidden("exceeded quota: team, requested: count/foo=1,count/shelljobs.shell.shelljob.dev=1, used: count/foo=3,count/shelljobs.shell.shelljob.dev=3, limited: count/foo=3,count/shelljobs.shell.shelljob.dev=3"),
			want: true, used: 3, limit: 3,
			text: "the ShellJob quota is full: 3 used of 3 (ResourceQuota team); finished jobs count until they expire or are deleted",
		},
		"a quota full of something else": {
			err:  forbidden("exceeded quota: objects, requested: count/objects=1, used: count/objects=9, limited: count/objects=9"),
			want: true, used: -1, limit: -1,
			text: "the namespace's ResourceQuota objects is full",
		},
		"forbidden by RBAC": {err: forbidden(`User "x" cannot create resource "shelljobs"`)},
		"invalid":           {err: apierrors.NewInvalid(schema.GroupKind{Group: "shell.shelljob.dev", Kind: "ShellJob"}, "x", nil)},
		"not from the API":  {err: errors.New("exceeded quota: q, requested: a=1, used: a=1, limited: a=1")},
		"no error":          {},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			q, ok := QuotaFull(tc.err)
			if ok != tc.want {
				t.Fatalf("QuotaFull(%v) = %v, want %v", tc.err, ok, tc.want)
			}
			if !ok {
				return
			}
			if q.Used != tc.used || q.Limit != tc.limit || q.Error() != tc.text || !errors.Is(q, tc.err) {
				t.Errorf("QuotaFull = used %d, limit %d, %q; want %d, %d, %q", q.Used, q.Limit, q.Error(), tc.used, tc.limit, tc.text)
			}
		})
	}
}
