package shelljob_test

import (
	"testing"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/shelljob"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

func TestKubernetesUser(t *testing.T) {
	cases := map[string]struct {
		origin shellv1alpha1.ShellJobOrigin
		want   string
	}{
		"the CLI's creator":                 {shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginCLI, User: "alice"}, "alice"},
		"a CLI job that names nobody":       {shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginCLI}, ""},
		"an older bot's job: a Telegram id": {shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginTelegram, User: "123456789", Chat: 1}, ""},
		"a negative id is an id too":        {shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginTelegram, User: "-100123"}, ""},
		"the identity the bot impersonated": {shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginTelegram, User: "alice@example.com"}, "alice@example.com"},
		"a Telegram job that names nobody":  {shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginTelegram}, ""},
		"an unknown source has no owner":    {shellv1alpha1.ShellJobOrigin{Source: "slack", User: "alice"}, ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			j := utiltesting.MakeShellJob("j", "ns").Origin(tc.origin).Obj()
			if got := shelljob.KubernetesUser(j); got != tc.want {
				t.Errorf("KubernetesUser(%+v) = %q, want %q", tc.origin, got, tc.want)
			}
		})
	}
}
