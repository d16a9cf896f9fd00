package chart_test

import (
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"shelljob.dev/shelljob/internal/shelljob"
)

// TestJobQuota: the chart caps the ShellJobs of its namespace, 10000 by
// default, on the resource that counts them (the CRD's plural and group).
func TestJobQuota(t *testing.T) {
	var crd struct {
		Spec struct {
			Group string `json:"group"`
			Names struct {
				Plural string `json:"plural"`
			} `json:"names"`
		} `json:"spec"`
	}
	data, err := os.ReadFile(filepath.Join(chartDir, "crds", "shell.shelljob.dev_shelljobs.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	if want := corev1.ResourceName("count/" + crd.Spec.Names.Plural + "." + crd.Spec.Group); shelljob.QuotaResource != want {
		t.Fatalf("shelljob.QuotaResource is %s, the CRD's count is %s", shelljob.QuotaResource, want)
	}
	for name, tc := range map[string]struct {
		set  []string
		want int64 // 0: no quota
	}{
		"default":  {want: 10000},
		"set":      {set: []string{"jobQuota.shellJobs=250"}, want: 250},
		"disabled": {set: []string{"jobQuota.enabled=false"}},
	} {
		t.Run(name, func(t *testing.T) {
			vs := valueSet{set: tc.set}
			quotas := ofType[*corev1.ResourceQuota](objects(t, vs.render(t)))
			if tc.want == 0 {
				if len(quotas) != 0 {
					t.Errorf("%d ResourceQuotas, want none", len(quotas))
				}
				return
			}
			if len(quotas) != 1 {
				t.Fatalf("%d ResourceQuotas, want 1", len(quotas))
			}
			q := quotas[0]
			got, ok := q.Spec.Hard[shelljob.QuotaResource]
			if q.Namespace != namespace || len(q.Spec.Hard) != 1 || !ok || got.Value() != tc.want {
				t.Errorf("ResourceQuota %s/%s hard %v, want only %s=%d in %s", q.Namespace, q.Name, q.Spec.Hard, shelljob.QuotaResource, tc.want, namespace)
			}
		})
	}
}
