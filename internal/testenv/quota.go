package testenv

import (
	"context"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/shelljob"
)

// FullJobQuota gives ns a ResourceQuota of limit ShellJobs, as the chart's
// (jobQuota), that counts limit jobs used, and waits until the API server
// refuses a job under it. envtest runs no ResourceQuota controller, so the
// quota's status is written here as that controller would; the refusal
// is the API server's own, its ResourceQuota admission plugin's. It
// returns the quota's name.
func (e *Env) FullJobQuota(t testing.TB, ns string, limit int64) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	count := corev1.ResourceList{shelljob.QuotaResource: *resource.NewQuantity(limit, resource.DecimalSI)}
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "shelljob-shelljobs", Namespace: ns},
		Spec: corev1.ResourceQuotaSpec{Hard: count}}
	if err := e.Client.Create(ctx, q); err != nil {
		t.Fatalf("create the ShellJob quota of %s: %v", ns, err)
	}
	q.Status = corev1.ResourceQuotaStatus{Hard: count, Used: count}
	if err := e.Client.Status().Update(ctx, q); err != nil {
		t.Fatalf("write the ShellJob quota's usage: %v", err)
	}
	// The probe names its creator, so that the origin policy, if a test
	// put it in place, lets it through to the quota.
	self := &authenticationv1.SelfSubjectReview{}
	if err := e.Client.Create(ctx, self); err != nil {
		t.Fatalf("who am I: %v", err)
	}
	probe := &shellv1alpha1.ShellJob{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "quota-probe-", Namespace: ns},
		Spec: shellv1alpha1.ShellJobSpec{Command: "true",
			Origin: shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginCLI, User: self.Status.UserInfo.Username}},
	}
	for {
		err := e.Client.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		if _, full := shelljob.QuotaFull(err); full {
			return q.Name
		}
		if ctx.Err() != nil {
			t.Fatalf("the API server does not refuse a ShellJob under the full quota %s/%s: %v", ns, q.Name, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
