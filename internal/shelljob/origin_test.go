package shelljob_test

import (
	"testing"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/shelljob"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

func TestTelegramUser(t *testing.T) {
	tg := shellv1alpha1.OriginTelegram
	cases := map[string]struct {
		origin   shellv1alpha1.ShellJobOrigin
		id       int64
		ok       bool
		kubeUser string
	}{
		"a Telegram job as its mapped identity": {
			origin: shellv1alpha1.ShellJobOrigin{Source: tg, User: "alice", TelegramUser: 111}, id: 111, ok: true, kubeUser: "alice"},
		"a Telegram job as the default identity": {
			origin: shellv1alpha1.ShellJobOrigin{Source: tg, User: "shelljob:telegram:111", TelegramUser: 111}, id: 111, ok: true,
			kubeUser: "shelljob:telegram:111"},
		"a Telegram job whose identity is a number": {
			origin: shellv1alpha1.ShellJobOrigin{Source: tg, User: "222", TelegramUser: 111}, id: 111, ok: true, kubeUser: "222"},
		"an older bot's job: the user is the Telegram id": {
			origin: shellv1alpha1.ShellJobOrigin{Source: tg, User: "111"}, id: 111, ok: true, kubeUser: ""},
		"an older bot's job of a negative id": {
			origin: shellv1alpha1.ShellJobOrigin{Source: tg, User: "-5"}, id: -5, ok: true, kubeUser: ""},
		"a Telegram job that names no one": {
			origin: shellv1alpha1.ShellJobOrigin{Source: tg}, kubeUser: ""},
		"a Telegram job whose user is no number and no id": {
			origin: shellv1alpha1.ShellJobOrigin{Source: tg, User: "alice"}, kubeUser: "alice"},
		"a CLI job named like a Telegram id": {
			origin: shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginCLI, User: "111"}, kubeUser: "111"},
		"a CLI job that claims a Telegram user": {
			origin: shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginCLI, User: "carol", TelegramUser: 111}, kubeUser: "carol"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			j := utiltesting.MakeShellJob("j", "ns").Origin(tc.origin).Obj()
			if id, ok := shelljob.TelegramUser(j); id != tc.id || ok != tc.ok {
				t.Errorf("TelegramUser = %d, %v; want %d, %v", id, ok, tc.id, tc.ok)
			}
			if got := shelljob.KubernetesUser(j); got != tc.kubeUser {
				t.Errorf("KubernetesUser = %q, want %q", got, tc.kubeUser)
			}
		})
	}
}
