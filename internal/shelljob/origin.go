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

// KubernetesUser is the Kubernetes user name a job was created as: its
// origin's user, "" for a Telegram job of an older bot, whose user is a
// Telegram user id (TelegramUser).
func KubernetesUser(j *shellv1alpha1.ShellJob) string {
	o := j.Spec.Origin
	if o.Source == shellv1alpha1.OriginTelegram && o.TelegramUser == 0 {
		if _, ok := TelegramUser(j); ok {
			return ""
		}
	}
	return o.User
}
