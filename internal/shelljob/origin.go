package shelljob

import (
	"strconv"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
)

// TelegramUser is the Telegram user who sent a Telegram job's command: its
// origin's telegramUser, or, for a job of an older bot, which wrote none,
// the Telegram user id its origin's user holds. It is false for a job that
// did not come from Telegram or names no Telegram user.
func TelegramUser(j *shellv1alpha1.ShellJob) (int64, bool) {
	o := j.Spec.Origin
	if o.Source != shellv1alpha1.OriginTelegram {
		return 0, false
	}
	if o.TelegramUser != 0 {
		return o.TelegramUser, true
	}
	id, err := strconv.ParseInt(o.User, 10, 64)
	return id, err == nil && id != 0
}

// KubernetesUser is the Kubernetes user name a job was created as, its
// owner: its origin's user, for a job from the CLI (its creator, as the
// origin admission policy checks) or from a bot that created it
// impersonating its sender's identity. It is "" for a Telegram job of an
// older bot, whose user is a Telegram user id (TelegramUser) and no
// Kubernetes name, and for a job of any other source: such a job has no
// owner.
func KubernetesUser(j *shellv1alpha1.ShellJob) string {
	o := j.Spec.Origin
	switch o.Source {
	case shellv1alpha1.OriginCLI:
		return o.User
	case shellv1alpha1.OriginTelegram:
		if _, ok := TelegramUser(j); ok && o.TelegramUser == 0 {
			return ""
		}
		return o.User
	}
	return ""
}

// SameCommand tells whether j is the job of a Telegram command whose job
// would have spec: a job from Telegram with the same origin (its chat,
// topic, message or guest query, its sender, and the Kubernetes user the
// bot created it as) and the same command. Only the bot, acting for that
// sender, can create a job that claims their Telegram origin (the chart's
// origin admission policy), so such an object is the command's own, and
// anything else under its name is not. A job of an older bot, which names
// its sender by Telegram id alone (TelegramUser), is the command's when
// that sender and the rest of its origin are.
func SameCommand(j *shellv1alpha1.ShellJob, spec shellv1alpha1.ShellJobSpec) bool {
	got, want := j.Spec.Origin, spec.Origin
	if got.Source != shellv1alpha1.OriginTelegram || want.Source != shellv1alpha1.OriginTelegram || j.Spec.Command != spec.Command {
		return false
	}
	if sender, ok := TelegramUser(j); !ok || sender != want.TelegramUser {
		return false
	}
	if user := KubernetesUser(j); user != "" && user != want.User {
		return false
	}
	got.User, got.TelegramUser, want.User, want.TelegramUser = "", 0, "", 0
	return got == want
}
