package bot

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/bot/delivery"
	"shelljob.dev/shelljob/bot/jobs"
	"shelljob.dev/shelljob/bot/pace"
	"shelljob.dev/shelljob/bot/preview"
	"shelljob.dev/shelljob/internal/texts"
)

// private tells whether the job's chat is a private one; for a guest
// answer, whether it was asked in one.
func (r *run) private() bool {
	if r.pv.kind == guestPreview {
		return !r.note.GroupPace
	}
	return r.note.Chat.Private()
}

func (r *run) previewText() string {
	s, own := preview.Running, 0
	switch {
	case r.job.State() == jobs.Stopping:
		s = preview.Stopping
	case r.job.AwaitingApproval():
		s = preview.AwaitingApproval
	case r.job.WaitingOwn() > 0:
		s, own = preview.WaitingOwn, r.job.WaitingOwn()
	case r.job.Waiting():
		s = preview.Queued
	}
	hint := ""
	if r.pv.kind == guestPreview {
		_, primary := r.b.nameSet()
		hint = fmt.Sprintf(texts.GuestStopHintFormat, primary)
	}
	return preview.Compose(preview.Header(r.job.Number(), s, own, hint), r.buf.TailText(preview.PreviewUnits, r.render()))
}

func (r *run) stopButtons() [][]Button {
	return [][]Button{{{Text: texts.StopButton, Data: "shk:" + strconv.FormatInt(r.job.Number(), 10)}}}
}

// open shows the preview as kind for the first time, or takes over the
// guest answer or the one a previous run of the bot left.
func (r *run) open(ctx context.Context, kind previewKind) {
	b := r.b
	text := r.previewText()
	chat := r.note.Chat
	if r.pv.kind != noPreview {
		r.pv.pacer = pace.New(b.cfg.Clock, delivery.Pace(kind, r.private()), r.job.Created)
		r.update(ctx, text)
		return
	}
	if kind == draftPreview {
		id := rand.Int64N(1<<62) + 1
		// Known before it shows, so that its Stop finds the job.
		r.job.SetPreview(0, id)
		if err := b.tg.To(chat).Draft(id).Text(ctx, text); err == nil {
			r.note.Draft = id
			r.opened(ctx, draftPreview, text)
			return
		} else {
			r.job.SetPreview(0, 0)
			b.cfg.Log.V(1).Info("Draft refused; using an edited message", "job", r.job.Name, "error", err.Error())
		}
	}
	id, err := b.tg.To(chat).Reply(r.cmdMsg).Silent().Buttons(r.stopButtons()).Text(ctx, text)
	if err != nil {
		b.cfg.Log.Error(err, "Could not send a preview; the final goes out as if there were none", "job", r.job.Name)
		r.pv.failed = true
		return
	}
	r.job.SetPreview(id, 0)
	r.note.Msg = id
	r.opened(ctx, editPreview, text)
}

// opened records the preview of kind that now shows text.
func (r *run) opened(ctx context.Context, kind previewKind, text string) {
	r.pv.kind = kind
	r.pv.pacer = pace.New(r.b.cfg.Clock, delivery.Pace(kind, r.private()), r.job.Created)
	r.pv.pacer.Done(true)
	r.pv.last = text
	r.annotatePreview(ctx)
}

func (r *run) annotatePreview(ctx context.Context) {
	if err := r.b.cluster.Annotate(ctx, r.job.Name, shellv1alpha1.AnnotationPreview, r.note.encode()); err != nil {
		r.b.cfg.Log.Error(err, "Could not record the preview", "job", r.job.Name)
	}
}

// update sends text to the preview and reports whether it worked.
func (r *run) update(ctx context.Context, text string) bool {
	var err error
	switch r.pv.kind {
	case editPreview:
		err = r.b.tg.To(r.note.Chat).Buttons(r.stopButtons()).Edit(r.note.Msg).Text(ctx, text)
	case draftPreview:
		err = r.b.tg.To(r.note.Chat).Draft(r.note.Draft).Text(ctx, text)
	case guestPreview:
		err = r.b.tg.Guest(*r.note.Guest).Text(ctx, text)
	case noPreview:
		return true
	}
	r.pv.pacer.Done(err == nil)
	if err != nil {
		r.b.cfg.Log.V(1).Info("Preview update failed", "job", r.job.Name, "error", err.Error())
		return false
	}
	r.pv.last = text
	return true
}
