package bot

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"shelljob.dev/shelljob/bot/command"
	"shelljob.dev/shelljob/bot/jobs"
	"shelljob.dev/shelljob/internal/shelljob"
	"shelljob.dev/shelljob/internal/texts"
)

// stopText stops j as .k does, for the chat admin caller, and says what
// it did: the sending of its files, while they are sent, or the job.
func (b *Bot) stopText(ctx context.Context, j *jobs.Job, caller int64) string {
	if j.StopSending() {
		return texts.FilesStopped(j.Number())
	}
	out, err := b.stopAs(ctx, j, caller)
	if err != nil {
		return stopFailed(j, err)
	}
	return out.Text(j.Number())
}

// kill runs a .k of caller: in chat, the message it replies to (replyTo)
// counts; guest is the guest chat's key for @bot .k there; kill is the
// command's name in the lists and the usage line.
func (b *Bot) kill(ctx context.Context, chat, caller int64, guest string, replyTo int, arg, kill string) string {
	visible := b.registry.Visible(chat, caller, guest)
	running := jobs.Unfinished(visible)
	form, n := command.ParseKill(arg)
	if replyTo != 0 && form == command.KillAlone && guest == "" {
		j := b.registry.Find(chat, replyTo)
		if j == nil || j.State() == jobs.Ended {
			return texts.NoRunningInReply
		}
		return b.stopText(ctx, j, caller)
	}
	switch form {
	case command.KillAlone:
		switch len(running) {
		case 0:
			return texts.NoRunning
		case 1:
			return b.stopText(ctx, running[0], caller)
		default:
			return texts.SeveralRunning(kill) + "\n" + b.listLines(running, b.poolsSeen(chat, visible) > 1)
		}
	case command.KillNumber:
		for _, j := range running {
			if j.Number() == n {
				return b.stopText(ctx, j, caller)
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
			lines[i] = b.stopText(ctx, running[i], caller)
		}
		return strings.Join(lines, "\n")
	case command.KillList:
		if len(running) == 0 {
			return texts.NoRunning
		}
		return b.listLines(running, b.poolsSeen(chat, visible) > 1)
	case command.KillUsage:
		return texts.KillUsage(kill)
	default:
		panic(fmt.Sprintf("bot: unknown kill form %d", form))
	}
}

// poolsSeen counts the pools of the jobs a chat sees, its own pool among
// them: from two on, its lists and notes name the pool of each job.
func (b *Bot) poolsSeen(chat int64, visible []*jobs.Job) int {
	pools := map[string]bool{b.chatPool(chat): true}
	for _, j := range visible {
		pools[j.Pool] = true
	}
	return len(pools)
}

// listLines lists jobs, a line each: id, age, "awaiting approval",
// "waiting" or "stopping", "guest", the pool when named, and the command's
// summary (shelljob.Summary).
func (b *Bot) listLines(js []*jobs.Job, named bool) string {
	now := b.cfg.Clock.Now()
	var lines []string
	for _, j := range js {
		parts := []string{fmt.Sprintf("#%d", j.Number()), age(now.Sub(j.Created).Seconds())}
		switch {
		case j.Sending():
			parts = append(parts, "sending files")
		case j.State() == jobs.Stopping:
			parts = append(parts, "stopping")
		case j.AwaitingApproval():
			parts = append(parts, "awaiting approval")
		case j.Waiting():
			parts = append(parts, "waiting")
		}
		if j.Guest != "" {
			parts = append(parts, "guest")
		}
		if named {
			parts = append(parts, texts.PoolNamed(j.Pool))
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
	return b.stopText(ctx, j, cb.From)
}

// restartPool answers .x, .xf and .sbb: it restarts the chat's pool as
// the admin who asks, and counts the jobs left on its old workers, split
// by who can stop them. The reply names the pool when the chat sees jobs
// of more than one.
func (b *Bot) restartPool(ctx context.Context, m Message) error {
	pool := b.chatPool(m.Chat.ID)
	if err := b.as(m.From).RestartPool(ctx, pool); err != nil {
		if why, ok := shelljob.Refusal(err); ok {
			return b.reply(ctx, m, why)
		}
		return b.reply(ctx, m, texts.RestartFailed(err))
	}
	visible := b.registry.Visible(m.Chat.ID, m.From, "")
	named := ""
	if b.poolsSeen(m.Chat.ID, jobs.Unfinished(visible)) > 1 {
		named = pool
	}
	all, err := b.cluster.List(ctx)
	if err != nil {
		return b.reply(ctx, m, texts.PoolRestarted(named))
	}
	seen := map[string]bool{}
	for _, j := range visible {
		seen[j.Name] = true
	}
	_, primary := b.nameSet()
	var here, other, guest, others int
	for i := range all {
		sj := &all[i]
		if shelljob.Pool(sj) != pool || sj.Status.Revision == "" || shelljob.IsFinished(sj) {
			continue
		}
		owner, _ := shelljob.TelegramUser(sj)
		own := owner == m.From
		isGuest := sj.Spec.Origin.GuestQuery != ""
		switch {
		case seen[sj.Name]:
			here++
		case isGuest && own:
			guest++
		case isGuest, sj.Spec.Origin.Chat > 0 && !own:
			others++
		default:
			other++
		}
	}
	lines := []string{texts.PoolRestarted(named)}
	if here > 0 {
		lines = append(lines, texts.OldPoolHere(here, named))
	}
	if other > 0 {
		lines = append(lines, texts.OldPoolOtherChat(other, named))
	}
	if guest > 0 {
		lines = append(lines, texts.OldPoolGuest(guest, primary, named))
	}
	if others > 0 {
		lines = append(lines, texts.OldPoolOtherAdmin(others, named))
	}
	return b.reply(ctx, m, strings.Join(lines, "\n"))
}
