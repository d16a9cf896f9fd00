package bot

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	utilrand "k8s.io/apimachinery/pkg/util/rand"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/bot/command"
	"shelljob.dev/shelljob/bot/jobs"
	"shelljob.dev/shelljob/internal/shelljob"
	"shelljob.dev/shelljob/internal/texts"
)

// intake is a command from a chat or a guest chat on its way to become a
// job: the ShellJob to create and how the bot shows it.
type intake struct {
	spec shellv1alpha1.ShellJobSpec
	// sent is when the command's message was sent: with the origin, it
	// names the job.
	sent time.Time
	info jobs.Info
	note previewNote
	kind previewKind
	// files go into the job's directory before it runs.
	files []File
	// refuse answers the command when its job could not be made.
	refuse func(text string) error
	// say tells the command's chat something on the way, nil where it
	// cannot (a guest chat, whose one answer is the job's).
	say func(text string)
}

// take makes the job of in, as its sender's identity, and starts its
// pump. A job that exists already is one a restarted bot was sent again:
// it is taken up, never made twice.
func (b *Bot) take(ctx context.Context, in intake) error {
	id := b.identityOf(in.info.Owner)
	in.spec.Origin.User, in.spec.Origin.TelegramUser = id.User, in.info.Owner
	in.spec.Pool = in.info.Pool
	in.spec.Hold = len(in.files) > 0
	if b.shuttingDown() {
		// Its command never runs; its final still goes out.
		in.spec.Stop, in.spec.StopReason = true, shellv1alpha1.StopReasonShutdown
	}
	sj, existed, err := b.submit(ctx, b.cluster.As(id), in)
	if err != nil || existed {
		closeFiles(in.files)
	}
	if existed {
		b.handled(ctx, sj)
		return nil
	}
	if err != nil {
		return in.refuse(submitFailed(err))
	}
	in.info.Command = in.spec.Command
	j := b.newJob(sj, in.info)
	b.cfg.Log.V(1).Info("Job submitted", "job", sj.Name, "number", sj.Status.Number, "mode", in.spec.Mode, "pool", in.spec.Pool,
		"chat", in.info.Chat, "guestChat", in.info.Guest, "user", in.info.Owner, "as", id.User)
	b.launch(&run{b: b, job: j, prefs: b.prefs(ctx, in.info.Owner), note: in.note, cmdMsg: in.info.CommandMsg, files: in.files, pv: previewState{kind: in.kind}})
	return nil
}

// submit creates the job of in as p, under its command's name
// (shelljob.TelegramName), and returns it; existed: the command's job
// was there already. An object under that name that is not the
// command's job (shelljob.SameCommand: anyone may create a job of a
// name they guess, but not one that claims the sender's Telegram origin)
// is left alone: it is never taken for the command's, nor is anything of
// it shown. The chat is told, and the command runs under the name with a
// random suffix; once.
func (b *Bot) submit(ctx context.Context, p Person, in intake) (sj *shellv1alpha1.ShellJob, existed bool, err error) {
	name := shelljob.TelegramName(in.spec.Origin, in.sent)
	annotations := map[string]string{shellv1alpha1.AnnotationPreview: in.note.encode()}
	sj, err = p.Submit(ctx, name, in.spec, annotations)
	if !errors.Is(err, ErrJobExists) {
		return sj, false, err
	}
	if shelljob.SameCommand(sj, in.spec) {
		return sj, true, nil
	}
	// A restarted bot sent the command again finds the job it runs as.
	if own := b.commandJob(ctx, name, in.spec); own != nil {
		return own, true, nil
	}
	renamed := name + "-" + utilrand.String(5)
	b.cfg.Log.Error(ErrJobExists, "The command's job name is taken by an object that is not its job; running it under another name",
		"job", name, "origin", sj.Spec.Origin, "renamed", renamed)
	if in.say != nil {
		in.say(texts.JobNameTaken(name, renamed))
	}
	sj, err = p.Submit(ctx, renamed, in.spec, annotations)
	switch {
	case errors.Is(err, ErrJobExists) && shelljob.SameCommand(sj, in.spec):
		return sj, true, nil
	case errors.Is(err, ErrJobExists):
		return nil, false, fmt.Errorf("job names %s and %s are taken by objects that are not this command's job", name, renamed)
	}
	return sj, false, err
}

// commandJob is the job of the command whose job would have spec and be
// named name, under name with a suffix (submit's renamed job), among the
// bot's jobs; nil when there is none. The name holds the time the message
// was sent: a job of the same chat, message id and command but another
// time is another message's (a chat's ids begin again when a test
// Telegram restarts), and never stands for this one.
func (b *Bot) commandJob(ctx context.Context, name string, spec shellv1alpha1.ShellJobSpec) *shellv1alpha1.ShellJob {
	all, err := b.cluster.List(ctx)
	if err != nil {
		b.cfg.Log.Error(err, "Could not look for the command's job")
		return nil
	}
	for i := range all {
		if strings.HasPrefix(all[i].Name, name+"-") && shelljob.SameCommand(&all[i], spec) {
			return &all[i]
		}
	}
	return nil
}

// startChatJob answers .a, .af and .aa in a chat.
func (b *Bot) startChatJob(ctx context.Context, m Message, cmd string, mode shellv1alpha1.ShellJobMode) error {
	if strings.ContainsRune(cmd, 0) {
		return b.reply(ctx, m, texts.NULCommand)
	}
	var files []File
	if m.ReplyTo != 0 {
		fs, err := b.tg.To(m.Chat).Files(ctx, m.ReplyTo, b.cfg.Files.InFile)
		if big := (*FileTooBigError)(nil); errors.As(err, &big) {
			closeFiles(fs)
			return b.reply(ctx, m, texts.InFileTooBig(big.Name, big.Size, big.Limit))
		}
		if err != nil {
			closeFiles(fs)
			b.cfg.Log.Error(err, "Could not read the replied-to message's files", "chat", m.Chat.ID, "msg", m.ReplyTo)
			return b.reply(ctx, m, texts.InFileFailed(err))
		}
		files = fs
	}
	return b.take(ctx, intake{
		spec: shellv1alpha1.ShellJobSpec{
			Command: cmd,
			Mode:    mode,
			Origin: shellv1alpha1.ShellJobOrigin{
				Source:  shellv1alpha1.OriginTelegram,
				Chat:    m.Chat.ID,
				Topic:   int64(m.Chat.Topic),
				Message: int64(m.ID),
			},
		},
		sent:   m.Date,
		info:   jobs.Info{Owner: m.From, Chat: m.Chat.ID, CommandMsg: m.ID, Pool: b.chatPool(m.Chat.ID)},
		note:   previewNote{Chat: m.Chat},
		files:  files,
		refuse: func(text string) error { return b.reply(ctx, m, text) },
		say: func(text string) {
			if err := b.reply(ctx, m, text); err != nil {
				b.cfg.Log.Error(err, "Could not tell the chat", "chat", m.Chat.ID)
			}
		},
	})
}

// HandleGuestQuery answers @bot .a and @bot .k from a guest chat.
func (b *Bot) HandleGuestQuery(ctx context.Context, q GuestQuery) error {
	names, primary := b.nameSet()
	c := command.ParseGuest(q.Text, names)
	if c.Kind == command.None {
		return nil
	}
	if !b.isAdmin(q.From) {
		_, err := b.tg.GuestQuery(q.QueryID).Answer(ctx, texts.NotAvailable)
		return err
	}
	key := "g" + strconv.FormatInt(q.Chat, 10)
	if c.Kind == command.K {
		_, err := b.tg.GuestQuery(q.QueryID).Answer(ctx, b.kill(ctx, 0, q.From, key, 0, c.Arg, "@"+primary+" .k"))
		return err
	}
	if strings.ContainsRune(c.Arg, 0) {
		_, err := b.tg.GuestQuery(q.QueryID).Answer(ctx, texts.NULCommand)
		return err
	}
	gm, err := b.tg.GuestQuery(q.QueryID).Answer(ctx, texts.GuestRunning)
	if err != nil {
		return err
	}
	return b.take(ctx, intake{
		spec: shellv1alpha1.ShellJobSpec{
			Command: c.Arg,
			Mode:    shellv1alpha1.ModeFork,
			Origin: shellv1alpha1.ShellJobOrigin{
				Source:     shellv1alpha1.OriginTelegram,
				GuestQuery: strconv.FormatInt(q.QueryID, 10),
			},
		},
		sent:   q.Date,
		info:   jobs.Info{Owner: q.From, Guest: key, Pool: b.cfg.Pool},
		note:   previewNote{Guest: &gm, GuestChat: key, GroupPace: !q.Private},
		kind:   guestPreview,
		refuse: func(text string) error { return b.tg.Guest(gm).Text(ctx, text) },
	})
}

// submitFailed answers a command whose job could not be created: in the
// words of the admission policy that refused it ("You may not run
// commands on pool prod."), or in words when the namespace's ShellJob
// quota is full, else with the error.
func submitFailed(err error) string {
	if why, ok := shelljob.Refusal(err); ok {
		return why
	}
	if q, ok := shelljob.QuotaFull(err); ok && q.Limit >= 0 {
		return texts.QuotaFull(q.Limit)
	}
	return fmt.Sprintf(texts.SubmitFailed, err)
}
