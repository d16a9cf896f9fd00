package shelljob

import (
	"context"
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
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

// A create refused for a quota not counted yet is tried again until it
// goes through; another refusal is not.
func TestCreateQuotaCounted(t *testing.T) {
	gr := schema.GroupResource{Group: shellv1alpha1.GroupVersion.Group, Resource: "shelljobs"}
	pending := apierrors.NewForbidden(gr, "tg-1", errors.New("status unknown for quota: shelljob-shelljobs, resources: count/shelljobs.shell.shelljob.dev"))
	other := apierrors.NewForbidden(gr, "tg-1", errors.New("no"))
	for name, tc := range map[string]struct {
		errs  []error
		want  error
		calls int
	}{
		"counted at once":      {errs: []error{nil}, calls: 1},
		"counted on the third": {errs: []error{pending, pending, nil}, calls: 3},
		"another refusal":      {errs: []error{other}, want: other, calls: 1},
	} {
		t.Run(name, func(t *testing.T) {
			calls := 0
			err := CreateQuotaCounted(context.Background(), func() error {
				calls++
				return tc.errs[min(calls, len(tc.errs))-1]
			})
			if err != tc.want || calls != tc.calls {
				t.Errorf("err %v after %d calls, want %v after %d", err, calls, tc.want, tc.calls)
			}
		})
	}
	if !QuotaPending(pending) || QuotaPending(other) {
		t.Error("QuotaPending")
	}
}
