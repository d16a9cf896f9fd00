package shelljob

import (
	"strconv"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
)

// KubernetesUser is the Kubernetes user name a job was created as, its
// owner: its origin's user, for a job from the CLI (its creator, as the
// origin admission policy checks) or from a bot that created it
// impersonating its sender's Kubernetes identity. It is "" for a
// Telegram job of an older bot, whose origin's user is the sender's
// Telegram user id (digits, no Kubernetes name), and for a job of any
// other source: such a job has no owner.
func KubernetesUser(j *shellv1alpha1.ShellJob) string {
	o := j.Spec.Origin
	switch o.Source {
	case shellv1alpha1.OriginCLI:
		return o.User
	case shellv1alpha1.OriginTelegram:
		if _, err := strconv.ParseInt(o.User, 10, 64); err == nil {
			return ""
		}
		return o.User
	}
	return ""
}
