package controllers

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
)

// ServiceAccountPolicy says which ServiceAccounts a pool's workers may run
// as: a pool names one (spec.serviceAccountName), and its workers get its
// token.
type ServiceAccountPolicy struct {
	// Allowed are the ServiceAccounts, in the worker namespace, that pools
	// may name. Empty: none; only pools that name no ServiceAccount get
	// workers.
	Allowed []string
	// Operator is the operator's own ServiceAccount, never allowed.
	Operator types.NamespacedName
}

// Refusal says why the workers of pool, in namespace workerNS, may not run
// as the ServiceAccount it names; "" if they may.
func (p ServiceAccountPolicy) Refusal(pool *shellv1alpha1.ShellPool, workerNS string) string {
	sa := pool.Spec.ServiceAccountName
	switch {
	case sa == "":
		return ""
	case sa == p.Operator.Name && workerNS == p.Operator.Namespace:
		return fmt.Sprintf("ServiceAccount %q is the operator's own (%s), which workers never run as, "+
			"whatever --allowed-service-accounts says; no workers are made", sa, p.Operator)
	case !slices.Contains(p.Allowed, sa):
		allowed := "none"
		if len(p.Allowed) > 0 {
			allowed = strings.Join(p.Allowed, ", ")
		}
		return fmt.Sprintf("ServiceAccount %q is not in the operator's --allowed-service-accounts (%s); no workers are made", sa, allowed)
	}
	return ""
}
