package chart_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// policyDir holds the admission policies for a kustomize install: the
// chart's, for the release shelljob in shelljob-system, bound in every
// namespace. TestPoliciesInSync checks them, and -update writes them.
const policyDir = rootDir + "/config/policy"

// chartOnly are the chart's policies that config/policy leaves out: what
// the bot may write, which go with the chart's bot and its identities.
var chartOnly = []string{"bot-self", "telegram"}

// generatedPolicy is one file of config/policy: a policy and its binding.
type generatedPolicy struct {
	file    string
	comment string
	objs    []any
}

// chartPolicies renders the chart's admission policies as config/policy's
// files, in the order of the chart.
func chartPolicies(t *testing.T) []generatedPolicy {
	t.Helper()
	const prefix = release + "-" + namespace + "-"
	var out []generatedPolicy
	for _, doc := range documents(t, valueSets[0].render(t, "--api-versions", mutatingAdmissionPolicies)) {
		obj, _, err := decoder.Decode(doc, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		var (
			name    string
			binding any
		)
		meta := func(n string) metav1.ObjectMeta {
			return metav1.ObjectMeta{Name: "shelljob-" + strings.TrimPrefix(n, prefix)}
		}
		switch p := obj.(type) {
		case *admissionregistrationv1.ValidatingAdmissionPolicy:
			name = p.Name
			obj = &admissionregistrationv1.ValidatingAdmissionPolicy{TypeMeta: p.TypeMeta, ObjectMeta: meta(p.Name), Spec: p.Spec}
			binding = &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
				TypeMeta:   metav1.TypeMeta{APIVersion: p.APIVersion, Kind: p.Kind + "Binding"},
				ObjectMeta: meta(p.Name),
				Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
					PolicyName: meta(p.Name).Name, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
			}
		case *admissionregistrationv1.MutatingAdmissionPolicy:
			name = p.Name
			obj = &admissionregistrationv1.MutatingAdmissionPolicy{TypeMeta: p.TypeMeta, ObjectMeta: meta(p.Name), Spec: p.Spec}
			binding = &admissionregistrationv1.MutatingAdmissionPolicyBinding{
				TypeMeta:   metav1.TypeMeta{APIVersion: p.APIVersion, Kind: p.Kind + "Binding"},
				ObjectMeta: meta(p.Name),
				Spec:       admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: meta(p.Name).Name},
			}
		default:
			continue
		}
		suffix := strings.TrimPrefix(name, prefix)
		if slices.Contains(chartOnly, suffix) {
			continue
		}
		out = append(out, generatedPolicy{file: suffix + ".yaml", comment: leadingComment(doc), objs: []any{obj, binding}})
	}
	return out
}

// leadingComment is the comment a rendered document opens with, but for
// helm's "# Source:" line.
func leadingComment(doc []byte) string {
	var b strings.Builder
	for line := range strings.Lines(string(doc)) {
		if !strings.HasPrefix(line, "#") {
			break
		}
		if !strings.HasPrefix(line, "# Source:") {
			b.WriteString(line)
		}
	}
	return b.String()
}

func (g generatedPolicy) render(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Generated from charts/shelljob by `go test ./test/chart -update`, for\n# the release shelljob in shelljob-system, bound in every namespace.\n%s", g.comment)
	for i, o := range g.objs {
		if i > 0 {
			b.WriteString("---\n")
		}
		data, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		// The API's Go types write an empty status and creation time.
		var m map[string]any
		if err := yaml.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "status")
		delete(m["metadata"].(map[string]any), "creationTimestamp")
		if data, err = yaml.Marshal(m); err != nil {
			t.Fatal(err)
		}
		b.Write(data)
	}
	return b.Bytes()
}

// TestPoliciesInSync: config/policy holds the chart's admission policies,
// as -update writes them, and its kustomization lists every one.
func TestPoliciesInSync(t *testing.T) {
	policies := chartPolicies(t)
	var files []string
	for _, g := range policies {
		files = append(files, g.file)
		path := filepath.Join(policyDir, g.file)
		got := g.render(t)
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (go test ./test/chart -update writes it)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("config/policy/%s differs from the chart's policy (go test ./test/chart -update rewrites it):\n%s", g.file, firstDiff(want, got))
		}
	}
	slices.Sort(files)
	var kustomization struct {
		Resources []string `json:"resources"`
	}
	data, err := os.ReadFile(filepath.Join(policyDir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &kustomization); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(kustomization.Resources, files) {
		t.Errorf("config/policy/kustomization.yaml lists %q, want %q", kustomization.Resources, files)
	}
}
