package settings

import (
	"context"
	"testing"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestParse(t *testing.T) {
	tests := map[string]struct {
		text string
		want Change
		ok   bool
	}{
		"private":     {"private drafts", Change{Private, "drafts"}, true},
		"case blanks": {"  GROUPS \n\t Edits ", Change{Groups, "edits"}, true},
		"final":       {"final reply", Change{Final, "reply"}, true},
		"render":      {"render Off", Change{Render, "off"}, true},
		"unknown":     {"render maybe", Change{}, false},
		"three":       {"render on now", Change{}, false},
		"empty":       {"", Change{}, false},
	}
	for name, tc := range tests {
		got, ok := ParseText(tc.text)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: ParseText(%q) = %v %v", name, tc.text, got, ok)
		}
	}
	if c, ok := ParseData("shs:private:edits"); !ok || c != (Change{Private, "edits"}) {
		t.Errorf("ParseData = %v %v", c, ok)
	}
	for _, bad := range []string{"shs:private", "shs:colour:red", "shk:3", "shs:final:edit:x"} {
		if _, ok := ParseData(bad); ok {
			t.Errorf("ParseData(%q) accepted", bad)
		}
	}
	if got := (Change{Groups, "drafts"}).Toast(); got != "Groups: Drafts." {
		t.Errorf("Toast = %q", got)
	}
	for _, row := range Defaults.Rows() {
		for _, b := range row {
			if _, ok := ParseData(b.Data); !ok {
				t.Errorf("button %q has data the parser does not know: %q", b.Text, b.Data)
			}
		}
	}
}

func TestEncodeKeepsOnlyNonDefaults(t *testing.T) {
	d, _ := Encode(Defaults)
	if string(d) != "{}" {
		t.Errorf("defaults stored as %s", d)
	}
	d, _ = Encode(Defaults.Apply(Change{Render, "off"}))
	if string(d) != `{"render":"off"}` {
		t.Errorf("stored %s", d)
	}
}

func TestDecodeUnknown(t *testing.T) {
	log := testr.New(t)
	tests := map[string]Prefs{
		`{"render":"off","final":"sideways"}`: Defaults.Apply(Change{Render, "off"}),
		`["drafts"]`:                          Defaults,
		`{"private":3}`:                       Defaults,
		`{"colour":"red","groups":"drafts"}`:  Defaults.Apply(Change{Groups, "drafts"}),
	}
	for data, want := range tests {
		if got := Decode([]byte(data), log); got != want {
			t.Errorf("Decode(%s) = %+v, want %+v", data, got, want)
		}
	}
}

func TestConfigMapStore(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().Build()
	s := &ConfigMapStore{Client: c, Name: types.NamespacedName{Namespace: "ns", Name: "bot-settings"}, Log: testr.New(t)}
	if p, err := s.Get(ctx, 7); err != nil || p != Defaults {
		t.Fatalf("Get = %+v %v", p, err)
	}
	want := Defaults.Apply(Change{Final, "reply"})
	if err := s.Set(ctx, 7, want); err != nil {
		t.Fatal(err)
	}
	if p, _ := s.Get(ctx, 7); p != want {
		t.Fatalf("Get = %+v, want %+v", p, want)
	}
	if p, _ := s.Get(ctx, 8); p != Defaults {
		t.Fatalf("other user got %+v", p)
	}
	var cm corev1.ConfigMap
	if err := c.Get(ctx, s.Name, &cm); err != nil || cm.Data["7"] != `{"final":"reply"}` {
		t.Fatalf("ConfigMap = %v %v", cm.Data, err)
	}
	if err := s.Set(ctx, 7, Defaults); err != nil {
		t.Fatal(err)
	}
	_ = c.Get(ctx, s.Name, &cm)
	if _, ok := cm.Data["7"]; ok {
		t.Fatalf("defaults kept a key: %v", cm.Data)
	}
}
