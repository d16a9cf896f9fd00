package texts

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/utf16text"
)

// Fair shares: a job whose author has as many jobs running on its pool as
// its maxRunningPerUser allows.

// MaxRunningPerUser is the Scheduled condition's message of a job that
// waits because its user has n jobs running on the pool, at its cap max:
// "2 jobs of alice are running on pool dev, as many as its
// maxRunningPerUser allows; waiting for one to end". RunningOfUser reads n
// back.
func MaxRunningPerUser(user string, n, max int32, pool string) string {
	jobs, are := "jobs", "are"
	if n == 1 {
		jobs, are = "job", "is"
	}
	of := "of " + user
	if user == "" {
		of = "with no user"
	}
	return fmt.Sprintf("%d %s %s %s running on pool %s, as many as its maxRunningPerUser (%d) allows; waiting for one to end",
		n, jobs, of, are, pool, max)
}

// RunningOfUser is how many jobs of its user a job waits for, from its
// Scheduled condition (MaxRunningPerUser); false when it waits for
// anything else.
func RunningOfUser(j *shellv1alpha1.ShellJob) (int, bool) {
	c := meta.FindStatusCondition(j.Status.Conditions, shellv1alpha1.ShellJobScheduled)
	if c == nil || c.Status != "False" || c.Reason != shellv1alpha1.ShellJobScheduledReasonMaxRunningPerUser {
		return 0, false
	}
	var n int
	if _, err := fmt.Sscanf(c.Message, "%d ", &n); err != nil {
		return 0, false
	}
	return n, true
}

// WaitingOwn is what a preview says of a job that waits for its author's
// other jobs: "waiting: 4 of your commands are running".
func WaitingOwn(n int) string {
	return plural(n, "waiting: %d of your commands is running", "waiting: %d of your commands are running")
}

// HeaderWaitingOwn is "⏳ #3 waiting: 4 of your commands are running".
func HeaderWaitingOwn(num int64, n int) string { return fmt.Sprintf("⏳ #%d %s", num, WaitingOwn(n)) }

// Approvals: a job of a pool that requires a second person's decision.

// HeaderAwaitingApproval is "⏳ #3 waiting for approval".
func HeaderAwaitingApproval(n int64) string { return fmt.Sprintf("⏳ #%d waiting for approval", n) }

// AwaitingApproval is the Approved condition's message of a job that
// waits for a decision until deadline.
func AwaitingApproval(pool string, deadline time.Time) string {
	return fmt.Sprintf("waiting until %s for someone allowed to approve on pool %s, other than its author, to approve or deny it",
		deadline.UTC().Format(time.RFC3339), pool)
}

// Approved is the Approved condition's message, and the Event's, of an
// approved job: "approved by carol".
func Approved(by string) string { return "approved by " + by }

// Denied is the Finished and Approved conditions' message of a denied job:
// "denied by bob".
func Denied(by string) string { return "denied by " + by }

// NotApprovedWithin is the Finished and Approved conditions' message of a
// job no one decided on in time: "not approved within 10 min: it never
// ran".
func NotApprovedWithin(timeout time.Duration) string {
	return fmt.Sprintf("not approved within %s: it never ran", Duration(timeout))
}

// DeniedNote ends the final of a denied job: "⛔ Denied by bob.".
func DeniedNote(by string) string {
	return approvalNote(shellv1alpha1.ShellJobFinishedReasonDenied, Denied(by))
}

// ExpiredNote ends the final of a job no one decided on in time: "⌛ Not
// approved within 10 min: it never ran.".
func ExpiredNote(timeout time.Duration) string {
	return approvalNote(shellv1alpha1.ShellJobFinishedReasonApprovalExpired, NotApprovedWithin(timeout))
}

// approvalNote is the final's note of a job that ended for its approval,
// from its Finished condition (EndNote): "" for any other end.
func approvalNote(reason, msg string) string {
	sign := map[string]string{
		shellv1alpha1.ShellJobFinishedReasonDenied:          "⛔ ",
		shellv1alpha1.ShellJobFinishedReasonApprovalExpired: "⌛ ",
	}[reason]
	if sign == "" || msg == "" {
		return ""
	}
	return sign + sentence(msg)
}

// sentence is msg with a capital first letter and a full stop.
func sentence(msg string) string {
	r, size := utf8.DecodeRuneInString(msg)
	return string(unicode.ToUpper(r)) + strings.TrimSuffix(msg[size:], ".") + "."
}

// Duration is a timeout for people: "10 min", "90 s", "2 h", "1 h 30 min".
func Duration(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d < time.Minute || d%time.Minute != 0 && d < 10*time.Minute:
		return fmt.Sprintf("%d s", int64(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%d min", int64(d/time.Minute))
	}
	h, m := int64(d/time.Hour), int64(d%time.Hour/time.Minute)
	if m == 0 {
		return fmt.Sprintf("%d h", h)
	}
	return fmt.Sprintf("%d h %d min", h, m)
}

// StoppedByNote is the stop note of a job someone stopped, who is named
// when it was not its author: "⏹ Stopped by bob (exit 130).".
func StoppedByNote(by string, code int) string {
	if by == "" {
		return StoppedNote(code)
	}
	return fmt.Sprintf("⏹ Stopped by %s (exit %d).", by, code)
}

// Approvals in the chat: the bot's message that asks a pool's approvers
// to decide on a job, under which Approve and Deny buttons sit until
// someone does.

// Buttons of an approval message.
const (
	ApproveButton = "✅ Approve"
	DenyButton    = "⛔ Deny"
)

// ApprovalUndecided heads an approval message whose job ended before
// anyone decided (its author stopped it, say).
const ApprovalUndecided = "⏹ It ended before anyone decided."

// messageUnits is what one Telegram message holds, in UTF-16 units.
const messageUnits = 4096

// ApprovalAsked is the message that asks for a decision on job #n, which
// author wants to run on pool: "🔐 #3 waits for approval on pool
// prod.\nbob asks to run:\n\nCOMMAND".
func ApprovalAsked(n int64, pool, author, command string) string {
	return approvalMessage(fmt.Sprintf("🔐 #%d waits for approval on pool %s.\n%s asks to run:", n, pool, author), command)
}

// ApprovalSettled is the approval message of job #n once it is settled,
// headed by note (ApprovedNote, DeniedNote, the ExpiredNote of EndNote,
// ApprovalUndecided): "⛔ Denied by dave.\n#3 on pool prod; bob asked to
// run:\n\nCOMMAND".
func ApprovalSettled(note string, n int64, pool, author, command string) string {
	return approvalMessage(fmt.Sprintf("%s\n#%d on pool %s; %s asked to run:", note, n, pool, author), command)
}

// approvalMessage is head, a blank line and the command, cut to fit one
// message (with "…" where it was cut).
func approvalMessage(head, command string) string {
	head += "\n\n"
	return head + cutTo(command, messageUnits-utf16text.Len(head))
}

// ApprovedNote heads the approval message of an approved job: "✅
// Approved by dave.".
func ApprovedNote(by string) string { return "✅ " + sentence(Approved(by)) }

// DecideFailed says that a decision on #n could not be recorded, and why.
func DecideFailed(n int64, err error) string {
	return fmt.Sprintf("Could not record the decision on #%d: %v", n, err)
}
