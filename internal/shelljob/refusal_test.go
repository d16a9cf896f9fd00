package shelljob_test

import (
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"shelljob.dev/shelljob/internal/shelljob"
)

// TestRefusal: a policy's words come out of the API server's refusal (its
// form, from a real API server, is in test/chart's TestAccess); anything
// else is no refusal.
func TestRefusal(t *testing.T) {
	jobs := schema.GroupResource{Group: "shell.shelljob.dev", Resource: "shelljobs"}
	policy := errors.New("ValidatingAdmissionPolicy 'p' with binding 'p' denied request: You may not run commands on pool prod.")
	for name, tc := range map[string]struct {
		err  error
		want string
		ok   bool
	}{
		"a policy's refusal":  {apierrors.NewForbidden(jobs, "j", policy), "You may not run commands on pool prod.", true},
		"wrapped":             {fmt.Errorf("create: %w", apierrors.NewForbidden(jobs, "j", policy)), "You may not run commands on pool prod.", true},
		"RBAC's refusal":      {apierrors.NewForbidden(jobs, "j", errors.New(`User "x" cannot create resource "shelljobs"`)), "", false},
		"an unreachable host": {errors.New("dial tcp: connection refused"), "", false},
		"a conflict":          {apierrors.NewConflict(jobs, "j", policy), "", false},
		"no error":            {nil, "", false},
	} {
		t.Run(name, func(t *testing.T) {
			if got, ok := shelljob.Refusal(tc.err); got != tc.want || ok != tc.ok {
				t.Errorf("Refusal = %q, %v; want %q, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
