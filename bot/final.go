package bot

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/bot/delivery"
	"shelljob.dev/shelljob/bot/longoutput"
	"shelljob.dev/shelljob/bot/preview"
	"shelljob.dev/shelljob/bot/settings"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/liveoutput"
	"shelljob.dev/shelljob/internal/shelljob"
	"shelljob.dev/shelljob/internal/texts"
)

// OutputGrace is how long the final of a job whose worker was lost waits
// for the rest of its output: it can no longer be read to its end, and the
// final goes out with what the bot has.
const OutputGrace = 5 * time.Second

// OutputWait is how long the final of a job that ended on a live worker
// waits for its output to be read to the end. The spool keeps it; only a
// worker that stops answering for this long cuts it.
const OutputWait = 2 * time.Minute

// outcome is how the job ended, for its final (shelljob.EndOf).
func (r *run) outcome() (code int, ran bool, stop preview.Stop) {
	obj := r.latest()
	if obj == nil {
		return -1, false, preview.NotStopped
	}
	e := shelljob.EndOf(obj)
	if e.NotApproved {
		return e.ExitCode, e.Ran, preview.NotApproved
	}
	return e.ExitCode, e.Ran, preview.StopOf(e.Stop)
}

// deliver sends the final and the files, then marks the job delivered.
// It waits for room in the finals' memory first, and records the attempt
// before it sends anything: a final that an earlier run of the bot died
// delivering goes out in a small form, without its output or files.
func (r *run) deliver(ctx context.Context) {
	b := r.b
	r.job.MarkEnded()
	code, ran, stop := r.outcome()
	release, err := b.finalMemory.take(ctx, r.finalCost(ran))
	if err != nil {
		return // the bot is going offline: its next run delivers it
	}
	defer release()
	if recorded, note := r.recordAttempt(ctx); !recorded {
		r.sendSmallFinal(ctx, code, ran, stop, note)
	} else {
		output, note := "", ""
		var long *longoutput.Output
		if ran {
			output, long, note = r.finalOutput(ctx)
		} else {
			note, _ = workerNote(r.latest()) // why it never ran, if not for a stop
		}
		if note == "" {
			note = r.endNoteText()
		}
		if r.pv.kind == guestPreview {
			r.sendGuestFinal(ctx, output, long, code, ran, stop, note)
		} else {
			r.sendFinal(ctx, chatFinal(output, long, code, ran, stop, note))
			if ran {
				r.sendFiles(ctx)
			}
		}
	}
	if err := b.cluster.Annotate(ctx, r.job.Name, shellv1alpha1.AnnotationDelivered, b.cfg.Clock.Now().UTC().Format(time.RFC3339)); err != nil {
		b.cfg.Log.Error(err, "Could not mark a job delivered", "job", r.job.Name)
	}
	b.registry.Finish(r.job)
	b.cfg.Log.V(1).Info("Job delivered", "job", r.job.Name, "number", r.job.Number(), "exitCode", code)
}

// finalCost is what the final holds of the finals' memory while it is
// delivered (finalMemory).
func (r *run) finalCost(ran bool) int64 {
	obj := r.latest()
	switch {
	case !ran:
		return textFinalMemory
	case r.fromSpool(), r.buf.Written(liveoutput.Stdout) > preview.FileChars, obj != nil && shelljob.MayHaveFiles(obj):
		return uploadMemory
	}
	return textFinalMemory
}

// recordAttempt records that the final is being delivered, and tells
// false when an earlier run of the bot recorded it already, or when it
// cannot be recorded: the final must then go out in its small form, with
// note saying which.
func (r *run) recordAttempt(ctx context.Context) (recorded bool, note string) {
	if obj := r.latest(); obj != nil {
		if _, tried := obj.Annotations[shellv1alpha1.AnnotationFinalAttempted]; tried {
			r.b.cfg.Log.Info("An earlier run of the bot did not finish delivering this final; sending it without its output", "job", r.job.Name)
			return false, texts.FinalNotSent
		}
	}
	if err := r.b.cluster.Annotate(ctx, r.job.Name, shellv1alpha1.AnnotationFinalAttempted, r.b.cfg.Clock.Now().UTC().Format(time.RFC3339)); err != nil {
		r.b.cfg.Log.Error(err, "Could not record the final's delivery; sending it without its output", "job", r.job.Name)
		return false, texts.FinalNotRecorded
	}
	return true, ""
}

// sendSmallFinal sends the final of a job without its output or files:
// how it ended, and the note that says why.
func (r *run) sendSmallFinal(ctx context.Context, code int, ran bool, stop preview.Stop, note string) {
	if r.pv.kind == guestPreview {
		r.sendGuestFinal(ctx, "", nil, code, ran, stop, note)
		return
	}
	r.sendFinal(ctx, chatFinal("", nil, code, ran, stop, note))
	if obj := r.latest(); ran && obj != nil && obj.Status.Pod != "" && shelljob.MayHaveFiles(obj) {
		r.sendNote(ctx, texts.FilesNotDelivered)
	}
}

// fromSpool tells whether the final reads the output again from the
// spool: the follow read it to its end, but the bot did not keep all of
// it.
func (r *run) fromSpool() bool {
	return r.complete.Load() && (r.followFrom > 0 || !r.buf.KeptAll())
}

// finalOutput is the output the final shows, rendered when the caller
// renders, and the note that says why it may be cut. An output read again
// from the spool that is longer than keptBytes comes as long, measured: the
// final's file reads the spool once more.
func (r *run) finalOutput(ctx context.Context) (output string, long *longoutput.Output, note string) {
	note, _ = workerNote(r.latest())
	if !r.complete.Load() {
		return r.keptText(), nil, cmp.Or(note, texts.OutputCut)
	}
	if !r.fromSpool() {
		return r.buf.FinalText(r.render()), nil, note
	}
	obj := r.latest()
	long, err := longoutput.Measure(func(w io.Writer) error {
		return r.b.cluster.FollowText(ctx, obj, agentapi.TextModeOf(r.render()), w)
	})
	if err == nil && long.Size() <= keptBytes {
		output, err = long.String()
		long = nil
	}
	if err != nil {
		r.b.cfg.Log.Error(err, "Could not read the output again from the spool; the final shows what the bot kept", "job", r.job.Name)
		return r.keptText(), nil, cmp.Or(note, texts.OutputCut)
	}
	return output, long, note
}

// keptText is what the bot kept of the output: its start and its end, with
// the not-kept line between them.
func (r *run) keptText() string {
	text := r.buf.FinalText(r.render())
	if r.followFrom > 0 {
		text = agentapi.GapLine(r.followFrom) + text
	}
	return text
}

// finalText is a chat final as it goes out: a short one as text; a long one
// as the message that shows its end and the .txt file that holds it whole.
type finalText struct {
	text string
	long bool
	head string
	file func() File
}

// chatFinal is the final of a job (preview.Final), built from output, or
// from long when set.
func chatFinal(output string, long *longoutput.Output, code int, ran bool, stop preview.Stop, note string) finalText {
	if long == nil {
		final := preview.Final(output, code, ran, stop, note)
		f := finalText{text: final, long: preview.IsLong(final)}
		if f.long {
			f.head = preview.LongHead(final)
			f.file = func() File { return File{Name: texts.OutputFileName, Data: []byte(final)} }
		}
		return f
	}
	end := preview.LongFinalEnd(code, stop, note)
	return finalText{long: true, head: preview.LongHead(long.Tail(preview.MessageUnits) + end), file: longFile(long, end)}
}

// longFile is the .txt file of a long output followed by end, read from
// the spool as it is uploaded; its Close ends that read.
func longFile(long *longoutput.Output, end string) func() File {
	return func() File {
		body := long.Reader()
		return File{
			Name: texts.OutputFileName,
			Reader: struct {
				io.Reader
				io.Closer
			}{io.MultiReader(body, strings.NewReader(end)), body},
			Size: long.Size() + int64(len(end)),
		}
	}
}

// sendOutputFile sends the final's .txt file in reply to message reply,
// read anew from its start for each try.
func (r *run) sendOutputFile(ctx context.Context, reply int, final finalText) (id int, err error) {
	err = r.b.finalPatience().Retry(ctx, func() error {
		f := final.file()
		defer f.Close()
		id, err = r.b.tg.To(r.note.Chat).Reply(reply).File(ctx, f)
		return err
	})
	return id, err
}

// workerNote is the note a final ends with when the job ended because
// of its worker (lost, evicted, out of memory) or its hold, and whether
// the worker may have gone with the output.
func workerNote(obj *shellv1alpha1.ShellJob) (note string, gone bool) {
	if obj == nil {
		return "", false
	}
	e := shelljob.EndOf(obj)
	_, gone = e.ByWorker()
	return texts.EndNote(e), gone
}

// sendGuestFinal edits a guest answer into its final. A long one becomes
// the output.txt document under a caption with the output's end; if that
// fails, the text cut to fit one message goes out as for a short one.
func (r *run) sendGuestFinal(ctx context.Context, output string, long *longoutput.Output, code int, ran bool, stop preview.Stop, note string) {
	b := r.b
	caption, file, ok := "", File{}, false
	if long != nil {
		output, ok = long.Tail(preview.MessageUnits), true
		caption = preview.GuestCaption(output, code, stop, note)
		file = longFile(long, preview.GuestLongEnd(code, stop, note))()
		defer file.Close()
	} else if c, f, isLong := preview.GuestLong(output, code, ran, stop, note); isLong {
		caption, file, ok = c, File{Name: texts.OutputFileName, Data: []byte(f)}, true
	}
	if ok {
		err := b.finals.Guest(*r.note.Guest).Caption(caption).File(ctx, file)
		if err == nil {
			return
		}
		b.cfg.Log.Error(err, "Could not attach the output file to a guest answer; sending its end as text", "job", r.job.Name)
	}
	if err := b.finals.Guest(*r.note.Guest).Text(ctx, preview.Guest(output, code, ran, stop, note)); err != nil {
		b.cfg.Log.Error(err, "Could not send a guest final", "job", r.job.Name)
	}
}

// sendPlain sends a final as before live output: a reply to the command,
// as text, or as the .txt file from preview.FileChars characters on.
// sync, when set, is called with the text before a text reply.
func (r *run) sendPlain(ctx context.Context, final finalText, sync func(string)) (int, error) {
	chat := r.note.Chat
	if final.long {
		return r.sendOutputFile(ctx, r.cmdMsg, final)
	}
	if sync != nil {
		sync(final.text)
	}
	return r.b.finals.To(chat).Reply(r.cmdMsg).Text(ctx, final.text)
}

// sendFinal delivers a chat job's final, by the caller's final mode.
func (r *run) sendFinal(ctx context.Context, final finalText) {
	b := r.b
	chat := r.note.Chat
	logErr := func(err error, what string) {
		if err != nil {
			b.cfg.Log.Error(err, what, "job", r.job.Name)
		}
	}
	syncDraft := func(text string) {
		logErr(b.finals.To(chat).Draft(r.note.Draft).Text(ctx, text), "Could not send the sync draft")
	}
	// text is the message that stands for the final.
	text := final.text
	if final.long {
		text = final.head
	}
	switch route := delivery.RouteOf(r.pv.kind, r.prefs.Final == settings.NewReply); route {
	case delivery.Reply:
		_, err := r.sendPlain(ctx, final, nil)
		logErr(err, "Could not send a final")
	case delivery.ReplyAfterDraft:
		_, err := r.sendPlain(ctx, final, syncDraft)
		logErr(err, "Could not send a final")
	case delivery.ReplyThenRemove:
		_, err := r.sendPlain(ctx, final, nil)
		logErr(err, "Could not send a final")
		if err := b.finals.To(chat).Delete(ctx, r.note.Msg); err != nil {
			logErr(b.finals.To(chat).Edit(r.note.Msg).Text(ctx, texts.FinishedBelow), "Could not remove a preview")
		}
	case delivery.DraftThenMessage:
		syncDraft(text)
		id, err := b.finals.To(chat).Reply(r.cmdMsg).Text(ctx, text)
		logErr(err, "Could not send a final")
		if err == nil && final.long {
			_, err := r.sendOutputFile(ctx, id, final)
			logErr(err, "Could not send the output file")
		}
	case delivery.EditInPlace:
		if err := b.finals.To(chat).Edit(r.note.Msg).Text(ctx, text); err != nil {
			b.cfg.Log.V(1).Info("Could not edit the preview into the final; sending it anew", "job", r.job.Name, "error", err.Error())
			_, err := r.sendPlain(ctx, final, nil)
			logErr(err, "Could not send a final")
			logErr(b.finals.To(chat).Delete(ctx, r.note.Msg), "Could not delete a preview")
			return
		}
		if final.long {
			_, err := r.sendOutputFile(ctx, r.note.Msg, final)
			logErr(err, "Could not send the output file")
		}
	default:
		panic(fmt.Sprintf("bot: unknown final route %d", route))
	}
}

// sendNote replies to the command with text.
func (r *run) sendNote(ctx context.Context, text string) {
	if _, err := r.b.finals.To(r.note.Chat).Reply(r.cmdMsg).Text(ctx, text); err != nil {
		r.b.cfg.Log.Error(err, "Could not send a note", "job", r.job.Name)
	}
}
