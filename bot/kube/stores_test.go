package kube_test

import (
	"context"
	"errors"
	"testing"

	"github.com/go-logr/logr/testr"
	"github.com/gotd/td/session"
	"github.com/gotd/td/telegram/updates"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"shelljob.dev/shelljob/bot/settings"
	"shelljob.dev/shelljob/bot/tgclient"
)

// The names cmd/bot gives the bot's Secret and ConfigMaps.
const (
	sessionName  = "shelljob-bot-session"
	updatesName  = "shelljob-bot-updates"
	settingsName = "shelljob-bot-settings"
)

func TestStores(t *testing.T) {
	useStores(t, env.Client, namespace(t))
}

// useStores runs the bot's session, updates state and settings stores
// through c: each is created, read back, changed and read back again.
func useStores(t *testing.T, c client.Client, ns string) {
	t.Helper()
	ctx := context.Background()

	sess := &tgclient.SecretSession{Client: c, Name: types.NamespacedName{Namespace: ns, Name: sessionName}}
	if _, err := sess.LoadSession(ctx); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("load of no session = %v", err)
	}
	for _, v := range []string{`{"Version":1,"Data":{"AuthKey":"a"}}`, `{"Version":1,"Data":{"AuthKey":"b"}}`} {
		if err := sess.StoreSession(ctx, []byte(v)); err != nil {
			t.Fatalf("store session: %v", err)
		}
		if got, err := sess.LoadSession(ctx); err != nil || string(got) != v {
			t.Fatalf("load session = %q %v, want %q", got, err, v)
		}
	}

	name := types.NamespacedName{Namespace: ns, Name: updatesName}
	st := &tgclient.ConfigMapState{Client: c, Name: name}
	if err := st.Load(ctx); err != nil {
		t.Fatalf("load state: %v", err)
	}
	for i, s := range []updates.State{{Pts: 10, Qts: 1, Date: 100, Seq: 1}, {Pts: 12, Qts: 1, Date: 120, Seq: 2}} {
		if err := st.SetState(ctx, 42, s); err != nil {
			t.Fatal(err)
		}
		if err := st.SetChannelPts(ctx, 42, 1000, 50+i); err != nil {
			t.Fatal(err)
		}
		if err := st.Flush(ctx); err != nil {
			t.Fatalf("flush state: %v", err)
		}
		again := &tgclient.ConfigMapState{Client: c, Name: name}
		if err := again.Load(ctx); err != nil {
			t.Fatalf("reload state: %v", err)
		}
		if got, ok, _ := again.GetState(ctx, 42); !ok || got != s {
			t.Fatalf("state after reload = %+v %v, want %+v", got, ok, s)
		}
		if pts, ok, _ := again.GetChannelPts(ctx, 42, 1000); !ok || pts != 50+i {
			t.Fatalf("channel pts after reload = %d %v", pts, ok)
		}
	}

	store := &settings.ConfigMapStore{Client: c, Name: types.NamespacedName{Namespace: ns, Name: settingsName}, Log: testr.New(t)}
	if p, err := store.Get(ctx, 7); err != nil || p != settings.Defaults {
		t.Fatalf("settings of nobody = %+v %v", p, err)
	}
	want := settings.Defaults.Apply(settings.Change{Setting: settings.Final, Value: "reply"})
	for _, p := range []settings.Prefs{want, settings.Defaults, want} {
		if err := store.Set(ctx, 7, p); err != nil {
			t.Fatalf("set settings: %v", err)
		}
		if got, err := store.Get(ctx, 7); err != nil || got != p {
			t.Fatalf("settings = %+v %v, want %+v", got, err, p)
		}
	}
}
