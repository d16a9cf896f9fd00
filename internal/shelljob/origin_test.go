package shelljob_test

import (
	"testing"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/shelljob"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

func TestOriginUsers(t *testing.T) {
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
		"a CLI job that names nobody": {
			origin: shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginCLI}, kubeUser: ""},
		"an unknown source has no owner": {
			origin: shellv1alpha1.ShellJobOrigin{Source: "slack", User: "alice", TelegramUser: 111}, kubeUser: ""},
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

func TestSameCommand(t *testing.T) {
	tg, cli := shellv1alpha1.OriginTelegram, shellv1alpha1.OriginCLI
	origin := shellv1alpha1.ShellJobOrigin{Source: tg, User: "alice", TelegramUser: 111, Chat: -1001, Topic: 7, Message: 42}
	spec := shellv1alpha1.ShellJobSpec{Command: "uptime", Origin: origin}
	with := func(edit func(*shellv1alpha1.ShellJobSpec)) *shellv1alpha1.ShellJob {
		j := &shellv1alpha1.ShellJob{Spec: *spec.DeepCopy()}
		edit(&j.Spec)
		return j
	}
	cases := map[string]struct {
		j    *shellv1alpha1.ShellJob
		want bool
	}{
		"the command's own job":                 {with(func(*shellv1alpha1.ShellJobSpec) {}), true},
		"its own, with its status and its mode": {with(func(s *shellv1alpha1.ShellJobSpec) { s.Mode = shellv1alpha1.ModeStateful }), true},
		"an older bot's job of the same sender": {with(func(s *shellv1alpha1.ShellJobSpec) { s.Origin.User, s.Origin.TelegramUser = "111", 0 }), true},
		"another command":                       {with(func(s *shellv1alpha1.ShellJobSpec) { s.Command = "echo squatted" }), false},
		"a CLI job of the same command": {with(func(s *shellv1alpha1.ShellJobSpec) {
			s.Origin = shellv1alpha1.ShellJobOrigin{Source: cli, User: "carol"}
		}), false},
		"a CLI job that copies the origin":     {with(func(s *shellv1alpha1.ShellJobSpec) { s.Origin.Source = cli }), false},
		"another sender":                       {with(func(s *shellv1alpha1.ShellJobSpec) { s.Origin.TelegramUser = 222 }), false},
		"another identity of the sender":       {with(func(s *shellv1alpha1.ShellJobSpec) { s.Origin.User = "carol" }), false},
		"an older bot's job of another sender": {with(func(s *shellv1alpha1.ShellJobSpec) { s.Origin.User, s.Origin.TelegramUser = "222", 0 }), false},
		"another chat":                         {with(func(s *shellv1alpha1.ShellJobSpec) { s.Origin.Chat = -1002 }), false},
		"another message":                      {with(func(s *shellv1alpha1.ShellJobSpec) { s.Origin.Message = 43 }), false},
		"another topic":                        {with(func(s *shellv1alpha1.ShellJobSpec) { s.Origin.Topic = 0 }), false},
		"a guest query":                        {with(func(s *shellv1alpha1.ShellJobSpec) { s.Origin.GuestQuery = "5" }), false},
		"a Telegram job that names no one":     {with(func(s *shellv1alpha1.ShellJobSpec) { s.Origin.User, s.Origin.TelegramUser = "", 0 }), false},
	}
	for name, tc := range cases {
		if got := shelljob.SameCommand(tc.j, spec); got != tc.want {
			t.Errorf("%s: SameCommand = %v, want %v", name, got, tc.want)
		}
	}
}
