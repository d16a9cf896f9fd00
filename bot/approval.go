package bot

import (
	"context"
	"strconv"
	"strings"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/shelljob"
	"shelljob.dev/shelljob/internal/texts"
)

// Approvals in the chat. A job of a pool that requires approval waits,
// unplaced, in AwaitingApproval; its pump then posts the approval
// message (the command, its author and its pool, with Approve and Deny
// buttons) in the pool's approvers' chat, or in the job's own, and keeps
// where it is in the job's preview note, so that a restarted bot finds it
// rather than ask again. A press records the presser's decision as the
// presser (shelljob.Decide, impersonating them): the API server decides
// who may, and its refusal is the toast. Once someone decided, or the job
// ended, the pump edits the message to say so, without its buttons.

// approvalPrefix starts the callback data of an approval message's
// buttons: "sha:a:UID" approves the job whose ShellJob has that UID,
// "sha:d:UID" denies it. The UID names one job for good: a press is
// checked against the job's own approval message, and the decision is
// taken on a fresh read of the job.
const approvalPrefix = "sha:"

// approvalNote is where a job's approval message is (previewNote).
type approvalNote struct {
	Chat Chat `json:"chat"`
	Msg  int  `json:"msg"`
}

// approvalState is what a pump knows of its job's approval message
// beyond its note.
type approvalState struct {
	// failed: it could not be sent; the approvers decide from a terminal.
	failed bool
	// settled: it says how the approval ended.
	settled bool
}

func approvalButtons(uid string) [][]Button {
	return [][]Button{{
		{Text: texts.ApproveButton, Data: approvalPrefix + "a:" + uid},
		{Text: texts.DenyButton, Data: approvalPrefix + "d:" + uid},
	}}
}

// parseApproval reads an approval button's callback data.
func parseApproval(data string) (shellv1alpha1.ApprovalDecision, string, bool) {
	verb, uid, ok := strings.Cut(strings.TrimPrefix(data, approvalPrefix), ":")
	if !ok || uid == "" {
		return "", "", false
	}
	switch verb {
	case "a":
		return shellv1alpha1.ApprovalApproved, uid, true
	case "d":
		return shellv1alpha1.ApprovalDenied, uid, true
	}
	return "", "", false
}

// syncApproval, at each turn of the pump, asks for the job's approval once
// the operator says it awaits one, and settles the approval message once
// someone decided or the job ended.
func (r *run) syncApproval(ctx context.Context) {
	obj := r.latest()
	if obj == nil {
		return
	}
	switch {
	case r.note.Approval == nil && !r.approval.failed && shelljob.IsAwaitingApproval(obj) && obj.Spec.Approval == nil:
		r.askApproval(ctx, obj)
	case r.note.Approval != nil && !r.approval.settled && (obj.Spec.Approval != nil || shelljob.IsFinished(obj)):
		r.settleApproval(ctx, obj)
	}
}

// askApproval sends the approval message of obj, and records where it is.
func (r *run) askApproval(ctx context.Context, obj *shellv1alpha1.ShellJob) {
	b := r.b
	pool := shelljob.Pool(obj)
	chat, reply := r.approversChat(ctx, pool)
	text := texts.ApprovalAsked(r.number(obj), pool, author(obj), obj.Spec.Command)
	id, err := b.tg.To(chat).Reply(reply).Buttons(approvalButtons(string(obj.UID))).Text(ctx, text)
	if err != nil {
		b.cfg.Log.Error(err, "Could not ask for the job's approval in the chat; it may be approved from a terminal", "job", r.job.Name, "chat", chat.ID)
		r.approval.failed = true
		return
	}
	r.note.Approval = &approvalNote{Chat: chat, Msg: id}
	r.job.SetApprovalMessage(chat.ID, id)
	r.annotatePreview(ctx)
}

// approversChat is where the job's approval is asked, and the message to
// reply to there: the pool's approvers' chat (spec.approval.chat), or the
// job's own, in reply to the command, when the pool names none, or one
// the bot cannot reach yet (it learns a chat from a message there). A
// guest job's own chat takes no message from the bot: its sender's
// private chat with the bot stands for it.
func (r *run) approversChat(ctx context.Context, pool string) (Chat, int) {
	b := r.b
	own, reply := r.note.Chat, r.cmdMsg
	if r.pv.kind == guestPreview {
		own, _ = b.chats.get(r.job.Owner)
		reply = 0
	}
	sp, err := b.cluster.Pool(ctx, pool)
	if err != nil {
		b.cfg.Log.Error(err, "Could not read the job's pool; asking for its approval in its own chat", "job", r.job.Name)
		return own, reply
	}
	if sp.Spec.Approval == nil || sp.Spec.Approval.Chat == 0 || sp.Spec.Approval.Chat == own.ID {
		return own, reply
	}
	if chat, ok := b.chats.get(sp.Spec.Approval.Chat); ok {
		return chat, 0
	}
	b.cfg.Log.Info("The bot cannot reach the pool's approvers' chat yet: a message there lets it; asking in the job's own chat",
		"job", r.job.Name, "pool", pool, "chat", sp.Spec.Approval.Chat)
	return own, reply
}

// settleApproval edits the approval message of obj to say how its
// approval ended, without its buttons.
func (r *run) settleApproval(ctx context.Context, obj *shellv1alpha1.ShellJob) {
	var note string
	switch d := obj.Spec.Approval; {
	case d != nil && d.Decision == shellv1alpha1.ApprovalApproved:
		note = texts.ApprovedNote(d.By)
	case d != nil:
		note = texts.DeniedNote(d.By)
	default:
		if note = texts.EndNote(shelljob.EndOf(obj)); note == "" {
			note = texts.ApprovalUndecided
		}
	}
	a := r.note.Approval
	text := texts.ApprovalSettled(note, r.number(obj), shelljob.Pool(obj), author(obj), obj.Spec.Command)
	if err := r.b.tg.To(a.Chat).Edit(a.Msg).Text(ctx, text); err != nil {
		r.b.cfg.Log.Error(err, "Could not say in the approval message how the approval ended", "job", r.job.Name)
	}
	r.approval.settled = true
}

// number is the job's #N.
func (r *run) number(obj *shellv1alpha1.ShellJob) int64 {
	if obj.Status.Number != 0 {
		return obj.Status.Number
	}
	return r.job.Number()
}

// author is who the chat names as the job's author: the Kubernetes user it
// was created as, or an older bot's job's Telegram id.
func author(obj *shellv1alpha1.ShellJob) string {
	if user := shelljob.KubernetesUser(obj); user != "" {
		return user
	}
	id, _ := shelljob.TelegramUser(obj)
	return strconv.FormatInt(id, 10)
}

// approvalPress answers an approval button: the toast text. The job, the
// message and the presser are checked at the press: an admin's press on
// the job's own approval message records their decision, as them.
func (b *Bot) approvalPress(ctx context.Context, cb Callback) string {
	if !b.isAdmin(cb.From) {
		return texts.OnlyAdmins
	}
	decision, uid, ok := parseApproval(cb.Data)
	if !ok {
		return texts.ButtonOutOfDate
	}
	j := b.registry.ByUID(uid)
	if j == nil {
		return texts.ButtonOutOfDate
	}
	if chat, msg := j.ApprovalMessage(); chat != cb.Chat.ID || msg != cb.MsgID {
		return texts.ButtonOutOfDate
	}
	n := j.Number()
	out, now, err := b.as(cb.From).Decide(ctx, j.Name, decision)
	if err != nil {
		if why, ok := shelljob.Refusal(err); ok {
			return why
		}
		b.cfg.Log.Error(err, "Could not record a decision on a job's approval", "job", j.Name, "user", cb.From)
		return texts.DecideFailed(n, err)
	}
	return out.Text(now, n, decision)
}
