package tgclient

import (
	"context"
	"errors"
	"testing"

	"github.com/gotd/td/session"
	"github.com/gotd/td/telegram/updates"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestSecretSession(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().Build()
	s := &SecretSession{Client: c, Name: types.NamespacedName{Namespace: "ns", Name: "sess"}}
	if _, err := s.LoadSession(ctx); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("empty load = %v", err)
	}
	for _, v := range []string{`{"v":1}`, `{"v":2}`} {
		if err := s.StoreSession(ctx, []byte(v)); err != nil {
			t.Fatal(err)
		}
		got, err := s.LoadSession(ctx)
		if err != nil || string(got) != v {
			t.Fatalf("load = %q %v, want %q", got, err, v)
		}
	}
}

func TestConfigMapStateSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().Build()
	name := types.NamespacedName{Namespace: "ns", Name: "upd"}
	s := &ConfigMapState{Client: c, Name: name}
	if err := s.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.SetPts(ctx, 1, 5); err == nil {
		t.Fatal("SetPts without a state must fail")
	}
	_ = s.SetState(ctx, 1, updates.State{Pts: 10, Qts: 2, Date: 100, Seq: 1})
	_ = s.SetPts(ctx, 1, 11)
	_ = s.SetQts(ctx, 1, 3)
	_ = s.SetChannelPts(ctx, 1, 77, 40)
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	r := &ConfigMapState{Client: c, Name: name}
	if err := r.Load(ctx); err != nil {
		t.Fatal(err)
	}
	st, ok, _ := r.GetState(ctx, 1)
	if !ok || st != (updates.State{Pts: 11, Qts: 3, Date: 100, Seq: 1}) {
		t.Fatalf("state after restart = %+v %v", st, ok)
	}
	if pts, ok, _ := r.GetChannelPts(ctx, 1, 77); !ok || pts != 40 {
		t.Fatalf("channel pts = %d %v", pts, ok)
	}
}
