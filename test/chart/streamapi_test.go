package chart_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

	streamv1alpha1 "shelljob.dev/shelljob/api/stream/v1alpha1"
	"shelljob.dev/shelljob/internal/streamapi"
)

// TestStreamAPI: the APIService of stream.shelljob.dev reaches every
// operator replica's API server through its Service, trusts the serving
// certificate the chart made for the Service's name, and stays served
// through a drain and a rollout.
func TestStreamAPI(t *testing.T) {
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			objs := objects(t, vs.render(t))
			services := ofType[*apiregistrationv1.APIService](objs)
			if len(services) != 1 {
				t.Fatalf("%d APIServices, want 1", len(services))
			}
			as := services[0]
			if as.Name != "v1alpha1.stream.shelljob.dev" || as.Spec.Group != streamv1alpha1.GroupName || as.Spec.Version != streamv1alpha1.GroupVersion.Version ||
				as.Spec.InsecureSkipTLSVerify || as.Spec.GroupPriorityMinimum >= 1000 {
				t.Errorf("APIService %s %+v: want %s, verified, below the CRDs' group priority", as.Name, as.Spec, streamv1alpha1.GroupVersion)
			}
			ref := as.Spec.Service
			var svc *corev1.Service
			for _, s := range ofType[*corev1.Service](objs) {
				if ref != nil && s.Name == ref.Name && s.Namespace == ref.Namespace {
					svc = s
				}
			}
			if svc == nil || ref.Port == nil || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != *ref.Port {
				t.Fatalf("the APIService's Service %+v is not the chart's, on its port", ref)
			}
			d := deployment(t, objs, "shelljob-operator")
			if !selects(svc.Spec.Selector, d.Spec.Template.Labels) {
				t.Errorf("Service %s selects %v, not the operator's pods %v", svc.Name, svc.Spec.Selector, d.Spec.Template.Labels)
			}
			c := d.Spec.Template.Spec.Containers[0]
			port := svc.Spec.Ports[0].TargetPort
			i := slices.IndexFunc(c.Ports, func(p corev1.ContainerPort) bool { return port.Type == intstr.String && p.Name == port.StrVal })
			if i < 0 || !slices.Contains(c.Args, "--stream-api-bind-address=:"+strconv.Itoa(int(c.Ports[i].ContainerPort))) {
				t.Fatalf("the Service's target port %s is not the stream API's port (args %q, ports %+v)", port.String(), c.Args, c.Ports)
			}
			if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Port != port || p.HTTPGet.Scheme != corev1.URISchemeHTTPS || p.HTTPGet.Path != "/readyz" {
				t.Errorf("readiness probe %+v: want the stream API's /readyz", p)
			}

			secret := certSecret(t, objs, c, d)
			checkServingCert(t, secret, as, svc)

			if *d.Spec.Replicas < 2 || d.Spec.Strategy.RollingUpdate == nil || d.Spec.Strategy.RollingUpdate.MaxUnavailable.IntValue() != 0 {
				t.Errorf("replicas %d, strategy %+v: want two, and a rollout that adds before it removes", *d.Spec.Replicas, d.Spec.Strategy)
			}
			pdbs := ofType[*policyv1.PodDisruptionBudget](objs)
			if len(pdbs) != 1 || !selects(pdbs[0].Spec.Selector.MatchLabels, d.Spec.Template.Labels) || pdbs[0].Spec.MaxUnavailable.IntValue() != 1 {
				t.Errorf("PodDisruptionBudgets %+v: want one of the operator's, one unavailable at most", pdbs)
			}
			var delegated, reader bool
			for _, b := range ofType[*rbacv1.ClusterRoleBinding](objs) {
				delegated = delegated || b.RoleRef.Name == "system:auth-delegator" && b.Subjects[0].Name == "shelljob-operator"
			}
			for _, b := range ofType[*rbacv1.RoleBinding](objs) {
				reader = reader || b.Namespace == "kube-system" && b.RoleRef.Name == "extension-apiserver-authentication-reader" && b.Subjects[0].Name == "shelljob-operator"
			}
			if !delegated || !reader {
				t.Errorf("the operator's delegated auth: auth-delegator %v, authentication reader %v", delegated, reader)
			}
		})
	}
	one := objects(t, valueSets[0].render(t, "--set", "operator.replicas=1"))
	if pdbs := ofType[*policyv1.PodDisruptionBudget](one); len(pdbs) != 0 {
		t.Errorf("one replica has a PodDisruptionBudget, which would block every drain")
	}
}

// certSecret is the Secret the operator's container reads its serving
// certificate from: the volume mounted at its --stream-api-cert-dir.
func certSecret(t *testing.T, objs []runtime.Object, c corev1.Container, d *appsv1.Deployment) *corev1.Secret {
	t.Helper()
	i := slices.IndexFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--stream-api-cert-dir=") })
	if i < 0 {
		t.Fatalf("args %q lack --stream-api-cert-dir", c.Args)
	}
	dir := strings.TrimPrefix(c.Args[i], "--stream-api-cert-dir=")
	m := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == dir })
	if m < 0 {
		t.Fatalf("nothing is mounted at %s", dir)
	}
	v := slices.IndexFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == c.VolumeMounts[m].Name })
	if v < 0 || d.Spec.Template.Spec.Volumes[v].Secret == nil {
		t.Fatalf("volume %s is no Secret's", c.VolumeMounts[m].Name)
	}
	name := d.Spec.Template.Spec.Volumes[v].Secret.SecretName
	for _, s := range ofType[*corev1.Secret](objs) {
		if s.Name == name && s.Namespace == d.Namespace {
			if len(s.Data[streamapi.CertFile]) == 0 || len(s.Data[streamapi.KeyFile]) == 0 {
				t.Errorf("Secret %s lacks %s or %s, which the server reads", name, streamapi.CertFile, streamapi.KeyFile)
			}
			return s
		}
	}
	t.Fatalf("no Secret %s", name)
	return nil
}

// selects tells whether selector selects labels.
func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// checkServingCert checks that the APIService's caBundle verifies the
// serving certificate for the Service's DNS name, as the aggregator does.
func checkServingCert(t *testing.T, secret *corev1.Secret, as *apiregistrationv1.APIService, svc *corev1.Service) {
	t.Helper()
	if secret.Type != corev1.SecretTypeTLS || len(secret.Data[corev1.TLSPrivateKeyKey]) == 0 {
		t.Fatalf("Secret %s: type %s; want a TLS Secret with its key", secret.Name, secret.Type)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(as.Spec.CABundle) {
		t.Fatal("the APIService's caBundle holds no certificate")
	}
	block, _ := pem.Decode(secret.Data[corev1.TLSCertKey])
	if block == nil {
		t.Fatal("tls.crt holds no certificate")
	}
	crt, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := crt.Verify(x509.VerifyOptions{Roots: roots, DNSName: svc.Name + "." + svc.Namespace + ".svc",
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("the serving certificate, for the aggregator: %v", err)
	}
	if _, err := tls.X509KeyPair(secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey]); err != nil {
		t.Errorf("tls.crt and tls.key: %v", err)
	}
}
