package bot

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/bot/command"
	"shelljob.dev/shelljob/bot/jobs"
	"shelljob.dev/shelljob/internal/shelljob"
	"shelljob.dev/shelljob/internal/texts"
)

// stopText stops j as .k does and says what it did: the sending of its
// files, while they are sent, or the job.
func (b *Bot) stopText(ctx context.Context, j *jobs.Job) string {
	if j.StopSending() {
		return texts.FilesStopped(j.Number())
	}
	out, err := b.stopJob(ctx, j, shellv1alpha1.StopReasonUser)
	if err != nil {
		return texts.StopFailed(j.Number(), err)
	}
	return out.Text(j.Number())
}

// killText runs a .k: m is the message (its ReplyTo counts in a chat),
// guest the guest chat's key for @bot .k there, kill the command's name in
// the lists and the usage line.
func (b *Bot) killText(ctx context.Context, m Message, arg, kill string) string {
	return b.kill(ctx, m.Chat.ID, m.From, "", m.ReplyTo, arg, kill)
}

func (b *Bot) kill(ctx context.Context, chat, caller int64, guest string, replyTo int, arg, kill string) string {
	running := jobs.Unfinished(b.registry.Visible(chat, caller, guest))
	form, n := command.ParseKill(arg)
	if replyTo != 0 && form == command.KillAlone && guest == "" {
		j := b.registry.Find(chat, replyTo)
		if j == nil || j.State() == jobs.Ended {
			return texts.NoRunningInReply
		}
		return b.stopText(ctx, j)
	}
	switch form {
	case command.KillAlone:
		switch len(running) {
		case 0:
			return texts.NoRunning
		case 1:
			return b.stopText(ctx, running[0])
		default:
			return texts.SeveralRunning(kill) + "\n" + b.listLines(running)
		}
	case command.KillNumber:
		for _, j := range running {
			if j.Number() == n {
				return b.stopText(ctx, j)
			}
		}
		return texts.NoSuchJob(n)
	case command.KillAll:
		if len(running) == 0 {
			return texts.NoRunning
		}
		// The jobs that wait go first: a running job stopped before them
		// frees its shell, and a waiting one could take it and run.
		lines := make([]string, len(running))
		var waiting, started []int
		for i, j := range running {
			if j.State() == jobs.Queued {
				waiting = append(waiting, i)
			} else {
				started = append(started, i)
			}
		}
		for _, i := range append(waiting, started...) {
			lines[i] = b.stopText(ctx, running[i])
		}
		return strings.Join(lines, "\n")
	case command.KillList:
		if len(running) == 0 {
			return texts.NoRunning
		}
		return b.listLines(running)
	case command.KillUsage:
		return texts.KillUsage(kill)
	default:
		panic(fmt.Sprintf("bot: unknown kill form %d", form))
	}
}

// listLines lists jobs, a line each: id, age, "waiting" or "stopping",
// "guest", and the command's summary (shelljob.Summary).
func (b *Bot) listLines(js []*jobs.Job) string {
	now := b.cfg.Clock.Now()
	var lines []string
	for _, j := range js {
		parts := []string{fmt.Sprintf("#%d", j.Number()), age(now.Sub(j.Created).Seconds())}
		switch {
		case j.Sending():
			parts = append(parts, "sending files")
		case j.State() == jobs.Stopping:
			parts = append(parts, "stopping")
		case j.Waiting():
			parts = append(parts, "waiting")
		}
		if j.Guest != "" {
			parts = append(parts, "guest")
		}
		parts = append(parts, j.Summary())
		lines = append(lines, strings.Join(parts, " · "))
	}
	return strings.Join(lines, "\n")
}

func age(s float64) string {
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", int(s))
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", int(s)/60, int(s)%60)
	default:
		return fmt.Sprintf("%dh%02dm", int(s)/3600, int(s)%3600/60)
	}
}

// stopPress answers a Stop button: the toast text.
func (b *Bot) stopPress(ctx context.Context, cb Callback) string {
	if !b.isAdmin(cb.From) {
		return texts.OnlyAdmins
	}
	id := strings.TrimPrefix(cb.Data, "shk:")
	if id == "" || strings.TrimFunc(id, func(r rune) bool { return r >= '0' && r <= '9' }) != "" {
		return texts.ButtonOutOfDate
	}
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return texts.ButtonOutOfDate
	}
	j := b.registry.ByNumber(n)
	if j == nil {
		return texts.AlreadyEnded(n)
	}
	if p, _ := j.Preview(); j.Chat != cb.Chat.ID || p != cb.MsgID {
		return texts.AlreadyEnded(n)
	}
	return b.stopText(ctx, j)
}

// restartPool answers .x, .xf and .sbb: it restarts the shell pool and
// counts the jobs left on old pools, split by who can stop them.
func (b *Bot) restartPool(ctx context.Context, m Message) error {
	if err := b.cluster.RestartPool(ctx, b.cfg.Pool); err != nil {
		return b.reply(ctx, m, fmt.Sprintf("Could not restart the shell pool: %v", err))
	}
	all, err := b.cluster.List(ctx)
	if err != nil {
		return b.reply(ctx, m, texts.PoolRestarted)
	}
	visible := map[string]bool{}
	for _, j := range b.registry.Visible(m.Chat.ID, m.From, "") {
		visible[j.Name] = true
	}
	_, primary := b.nameSet()
	var here, other, guest, others int
	for i := range all {
		sj := &all[i]
		if sj.Spec.Pool != b.cfg.Pool || sj.Status.Revision == "" || shelljob.IsFinished(sj) {
			continue
		}
		owner, _ := shelljob.TelegramUser(sj)
		own := owner == m.From
		isGuest := sj.Spec.Origin.GuestQuery != ""
		switch {
		case visible[sj.Name]:
			here++
		case isGuest && own:
			guest++
		case isGuest, sj.Spec.Origin.Chat > 0 && !own:
			others++
		default:
			other++
		}
	}
	lines := []string{texts.PoolRestarted}
	if here > 0 {
		lines = append(lines, texts.OldPoolHere(here))
	}
	if other > 0 {
		lines = append(lines, texts.OldPoolOtherChat(other))
	}
	if guest > 0 {
		lines = append(lines, texts.OldPoolGuest(guest, primary))
	}
	if others > 0 {
		lines = append(lines, texts.OldPoolOtherAdmin(others))
	}
	return b.reply(ctx, m, strings.Join(lines, "\n"))
}
