package cli

import (
	"testing"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

// TestOwner: ls names a job's Kubernetes user, and an older bot's job,
// which recorded the Telegram id alone, by that id.
func TestOwner(t *testing.T) {
	for _, tc := range []struct {
		origin shellv1alpha1.ShellJobOrigin
		want   string
	}{
		{shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginCLI, User: "carol"}, "carol"},
		{shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginTelegram, User: "alice", TelegramUser: 111}, "alice"},
		{shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginTelegram, User: "111"}, "tg:111"},
		{shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginCLI}, "<none>"},
	} {
		if got := owner(utiltesting.MakeShellJob("j", "ns").Origin(tc.origin).Obj()); got != tc.want {
			t.Errorf("owner of %+v = %q, want %q", tc.origin, got, tc.want)
		}
	}
}
