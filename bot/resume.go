package bot

import (
	"context"
	"encoding/json"
	"fmt"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/bot/jobs"
	"shelljob.dev/shelljob/internal/liveoutput"
	"shelljob.dev/shelljob/internal/shelljob"
	"shelljob.dev/shelljob/internal/texts"
)

// resume picks up the jobs a previous run of the bot left undelivered.
func (b *Bot) resume(ctx context.Context) error {
	all, err := b.cluster.List(ctx)
	if err != nil {
		return fmt.Errorf("list jobs: %w", err)
	}
	for i := range all {
		b.adopt(ctx, &all[i])
	}
	return nil
}

// handled answers a command whose job exists: a restarted bot was sent the
// command again. The job is delivered, followed already (resume took it
// up), or taken up now; it is never created or answered again.
func (b *Bot) handled(ctx context.Context, sj *shellv1alpha1.ShellJob) {
	b.cfg.Log.Info("Command already handled: its job exists", "job", sj.Name)
	if b.registry.Get(sj.Name) == nil {
		b.adopt(ctx, sj)
	}
}

// adopt follows a job that a previous run of the bot left undelivered: its
// preview comes back and its final is delivered.
func (b *Bot) adopt(ctx context.Context, sj *shellv1alpha1.ShellJob) {
	if _, done := sj.Annotations[shellv1alpha1.AnnotationDelivered]; done {
		return
	}
	var note previewNote
	if err := json.Unmarshal([]byte(sj.Annotations[shellv1alpha1.AnnotationPreview]), &note); err != nil {
		b.cfg.Log.Info("Undelivered job without a readable preview note; skipped", "job", sj.Name)
		return
	}
	owner, _ := shelljob.TelegramUser(sj)
	r := &run{b: b, prefs: b.prefs(ctx, owner), note: note, cmdMsg: int(sj.Spec.Origin.Message)}
	// The CR's timestamp has whole seconds, fine for a job that started
	// before this bot did; a fresh job times its preview by the clock.
	j := jobs.Info{Owner: owner, Chat: note.Chat.ID, CommandMsg: r.cmdMsg, Command: sj.Spec.Command, Guest: note.GuestChat,
		Pool: shelljob.Pool(sj), Created: sj.CreationTimestamp.Time}
	b.chats.learn(note.Chat)
	switch {
	case note.Guest != nil:
		r.pv.kind = guestPreview
		j.Chat = 0
	case note.Msg != 0:
		r.pv.kind = editPreview
	case note.Draft != 0:
		r.pv.kind = draftPreview
	}
	r.job = b.newJob(sj, j)
	r.job.SetPreview(note.Msg, note.Draft)
	if a := note.Approval; a != nil {
		b.chats.learn(a.Chat)
		r.job.SetApprovalMessage(a.Chat.ID, a.Msg)
	}
	r.resumed = true
	if sj.Spec.Hold && !shelljob.IsFinished(sj) {
		r.setEndNote(b.releaseHeld(ctx, sj, owner))
	}
	r.setObj(sj.DeepCopy())
	// The preview shows the output's end, read from the spool; the
	// final reads the whole output there again.
	r.followFrom = max(0, sj.Status.OutputBytes-liveoutput.DefaultPreviewBytes)
	b.cfg.Log.Info("Resuming an undelivered job", "job", sj.Name)
	b.launch(r)
}

// releaseHeld settles a held job that a previous run of the bot left: its
// replied-to files went with that run. A job whose files are in place
// (AnnotationFilesPut) lost only its release and is released; any other
// is stopped before it runs, and the returned note ends its final. Both
// are done as the job's sender, whose command it is.
func (b *Bot) releaseHeld(ctx context.Context, sj *shellv1alpha1.ShellJob, sender int64) string {
	if _, put := sj.Annotations[shellv1alpha1.AnnotationFilesPut]; put {
		if err := b.as(sender).Release(ctx, sj.Name); err != nil {
			b.cfg.Log.Error(err, "Could not release a held job; the operator's hold timeout ends it", "job", sj.Name)
		}
		return ""
	}
	if _, _, err := b.as(sender).Stop(ctx, sj.Name); err != nil {
		b.cfg.Log.Error(err, "Could not stop a held job; the operator's hold timeout ends it", "job", sj.Name)
	}
	return texts.HeldAtRestart
}
