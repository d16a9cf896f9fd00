package shelljob

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
)

const (
	// SummaryRunes is the most runes of a command that Summary keeps: the
	// reference's `.k ls` shows the first 60 characters of a command.
	SummaryRunes = 60
	// maxMessage is the API's limit on a condition message.
	maxMessage = 32768
)

// IsFinished tells whether the job has ended: its command exited, it was
// stopped before it ran, or its worker was lost. Its Finished condition or
// a final phase says so; a phase this version does not know is not final,
// and never a panic, so an older reader keeps working next to a newer
// operator.
func IsFinished(j *shellv1alpha1.ShellJob) bool {
	if meta.IsStatusConditionTrue(j.Status.Conditions, shellv1alpha1.ShellJobFinished) {
		return true
	}
	switch j.Status.Phase {
	case shellv1alpha1.PhaseSucceeded, shellv1alpha1.PhaseFailed, shellv1alpha1.PhaseStopped,
		shellv1alpha1.PhaseDenied, shellv1alpha1.PhaseExpired:
		return true
	default:
		return false
	}
}

// Phase is the job's phase, Queued before the operator first wrote it.
func Phase(j *shellv1alpha1.ShellJob) shellv1alpha1.ShellJobPhase {
	if j.Status.Phase == "" {
		return shellv1alpha1.PhaseQueued
	}
	return j.Status.Phase
}

// IsWaiting tells whether the job waits for a worker: the operator could
// not place it (its Scheduled condition is False) and it has not ended. A
// job the operator has not looked at yet, or one placed but not started,
// does not wait.
func IsWaiting(j *shellv1alpha1.ShellJob) bool {
	return !IsFinished(j) && !IsAssigned(j) && meta.IsStatusConditionFalse(j.Status.Conditions, shellv1alpha1.ShellJobScheduled)
}

// IsStopped tells whether the job ended because of a stop: its command
// ended after one, or never ran. Its Finished condition's reason or its
// phase says so.
func IsStopped(j *shellv1alpha1.ShellJob) bool {
	if c := meta.FindStatusCondition(j.Status.Conditions, shellv1alpha1.ShellJobFinished); c != nil && c.Status == metav1.ConditionTrue {
		switch c.Reason {
		case shellv1alpha1.ShellJobFinishedReasonStopped, shellv1alpha1.ShellJobFinishedReasonStoppedBeforeRun:
			return true
		}
	}
	return j.Status.Phase == shellv1alpha1.PhaseStopped
}

// IsAssigned tells whether the job has a worker pod, started or not.
func IsAssigned(j *shellv1alpha1.ShellJob) bool {
	return j.Status.Pod != ""
}

// IsStarted tells whether the job's command was started.
func IsStarted(j *shellv1alpha1.ShellJob) bool {
	return j.Status.Ran
}

// StartRecordWait is how long a reader waits for the record of a start
// in flight (IsStarting) before it takes the job as not started: a job
// placed on a worker that is not ready yet starts when it is, not in a
// moment.
const StartRecordWait = 30 * time.Second

// IsStarting tells whether the job is being started: placed on a worker,
// not held, and neither its start nor its end recorded. The operator
// records a start after the agent took it, so a reader who saw the
// output end (an exec) may read the job before the record, which comes
// next.
func IsStarting(j *shellv1alpha1.ShellJob) bool {
	return IsAssigned(j) && !j.Spec.Hold && !IsStarted(j) && !IsFinished(j)
}

// MayHaveFiles tells whether an ended job may have left files in its
// $SHELLJOB_OUT: its status counts some, or counts nothing because its
// agent did not say. Only then is fetching them worth an exec.
func MayHaveFiles(j *shellv1alpha1.ShellJob) bool {
	return j.Status.Files == nil || j.Status.Files.Count > 0
}

// IsStopRequested tells whether the job is to stop: a client set spec.stop,
// the job is being deleted, or the operator stopped it for a timeout.
func IsStopRequested(j *shellv1alpha1.ShellJob) bool {
	return j.Spec.Stop || j.DeletionTimestamp != nil || j.Status.StopReason != ""
}

// RequestedStopReason is why a client asked the job to stop: its
// spec.stopReason, User when it named none. A deletion counts as a User stop.
func RequestedStopReason(j *shellv1alpha1.ShellJob) shellv1alpha1.StopReason {
	if j.Spec.StopReason != "" {
		return j.Spec.StopReason
	}
	return shellv1alpha1.StopReasonUser
}

// Stopper is who stopped the job: its spec.stopBy, when a person's stop
// (not a timeout) is what stops it; "" when no one is named.
func Stopper(j *shellv1alpha1.ShellJob) string {
	if !j.Spec.Stop || j.Status.StopReason == shellv1alpha1.StopReasonTimeout {
		return ""
	}
	return j.Spec.StopBy
}

// ByStopper is " by bob" when Stopper names someone, "" otherwise, for
// the messages that tell a stop: "stopped by bob (User)".
func ByStopper(j *shellv1alpha1.ShellJob) string {
	if who := Stopper(j); who != "" {
		return " by " + who
	}
	return ""
}

// Delivered tells whether a client marked the job delivered
// (AnnotationDelivered), and when: the mark's RFC 3339 time, zero if it
// holds none.
func Delivered(j *shellv1alpha1.ShellJob) (time.Time, bool) {
	v, ok := j.Annotations[shellv1alpha1.AnnotationDelivered]
	if !ok {
		return time.Time{}, false
	}
	at, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, true
	}
	return at, true
}

// DeliveredPatch is the merge patch that marks a job delivered
// (AnnotationDelivered) at at; with a uid, only the job of that UID, not
// one made since under its name.
func DeliveredPatch(uid types.UID, at time.Time) []byte {
	meta := map[string]any{"annotations": map[string]string{shellv1alpha1.AnnotationDelivered: at.UTC().Format(time.RFC3339)}}
	if uid != "" {
		meta["uid"] = uid
	}
	patch, _ := json.Marshal(map[string]any{"metadata": meta})
	return patch
}

// AwaitsDelivery tells whether a reader still has to deliver the job's
// final: it came from Telegram, whose bot marks each job it delivered, and
// carries no mark yet.
func AwaitsDelivery(j *shellv1alpha1.ShellJob) bool {
	_, done := Delivered(j)
	return j.Spec.Origin.Source == shellv1alpha1.OriginTelegram && !done
}

// Expiry is when a finished job's ttl runs out: ttl after the later of its
// CompletionTime and its delivery mark. A job that awaits delivery stays
// at least grace after its end, however short its ttl, since its reader
// still needs it; the mark, once set, starts the ttl again. A job with no
// CompletionTime never expires (zero time, false).
func Expiry(j *shellv1alpha1.ShellJob, ttl, grace time.Duration) (time.Time, bool) {
	if j.Status.CompletionTime == nil {
		return time.Time{}, false
	}
	end := j.Status.CompletionTime.Time
	from := end
	if at, ok := Delivered(j); ok && at.After(from) {
		from = at
	}
	expiry := from.Add(ttl)
	if AwaitsDelivery(j) {
		expiry = later(expiry, end.Add(grace))
	}
	return expiry, true
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// TelegramName is the name of the job of a Telegram command, from where
// the command came and when it was sent: tg-<chat>-<message>-<unix time>
// for a chat message, tg-q<query>-<unix time> for a guest chat query, with
// a minus sign written "m" (tg-m1001234-56-1767225600). A command seen
// twice, as when a restarted bot is sent updates again, names one job, and
// the second create fails with AlreadyExists; the time tells apart a
// message of a server that numbers its messages anew (a reset test
// server). It is "" when the origin names neither, and the job then gets a
// generated name.
func TelegramName(o shellv1alpha1.ShellJobOrigin, sent time.Time) string {
	at := strconv.FormatInt(sent.Unix(), 10)
	switch {
	case o.Chat != 0 && o.Message != 0:
		return "tg-" + dnsInt(strconv.FormatInt(o.Chat, 10)) + "-" + dnsInt(strconv.FormatInt(o.Message, 10)) + "-" + dnsInt(at)
	case o.GuestQuery != "":
		if _, err := strconv.ParseInt(o.GuestQuery, 10, 64); err == nil {
			return "tg-q" + dnsInt(o.GuestQuery) + "-" + dnsInt(at)
		}
	}
	return ""
}

// dnsInt writes a decimal integer's sign as "m", which a DNS-1123 name may
// hold anywhere.
func dnsInt(s string) string {
	if rest, ok := strings.CutPrefix(s, "-"); ok {
		return "m" + rest
	}
	return s
}

// Mode is the job's mode, Fork when unset.
func Mode(j *shellv1alpha1.ShellJob) shellv1alpha1.ShellJobMode {
	if j.Spec.Mode == "" {
		return shellv1alpha1.ModeFork
	}
	return j.Spec.Mode
}

// Pool is the name of the job's pool, DefaultPool when unset.
func Pool(j *shellv1alpha1.ShellJob) string {
	if j.Spec.Pool == "" {
		return shellv1alpha1.DefaultPool
	}
	return j.Spec.Pool
}

// Summary is the first non-blank line of a command, trimmed and cut to
// SummaryRunes runes. It ends in "…" when anything was left out: the rest
// of the line or further lines. It is a string of its own: a cache that
// keeps a slim job's summary does not keep its command with it.
func Summary(cmd string) string {
	first, _, cut := strings.Cut(strings.TrimSpace(cmd), "\n")
	line := strings.TrimSpace(strings.ToValidUTF8(first, "\uFFFD"))
	if utf8.RuneCountInString(line) > SummaryRunes {
		line = strings.TrimSpace(line[:runeOffset(line, SummaryRunes-1)])
		cut = true
	}
	if cut {
		return line + "…"
	}
	return strings.Clone(line)
}

// runeOffset is the byte offset of rune n of the valid UTF-8 s.
func runeOffset(s string, n int) int {
	for i := range s {
		if n == 0 {
			return i
		}
		n--
	}
	return len(s)
}

// SummaryOf is the job's summary as `.k ls` and `kubectl shelljob ls` show
// it: its status.summary, or the Summary of its command before the
// operator wrote one.
func SummaryOf(j *shellv1alpha1.ShellJob) string {
	if j.Status.Summary != "" {
		return j.Status.Summary
	}
	return Summary(j.Spec.Command)
}

// SetScheduledCondition sets the Scheduled condition and reports whether
// anything changed.
func SetScheduledCondition(j *shellv1alpha1.ShellJob, now time.Time, status metav1.ConditionStatus, reason, msg string) bool {
	return setCondition(&j.Status.Conditions, j.Generation, now, shellv1alpha1.ShellJobScheduled, status, reason, msg)
}

// SetFinishedCondition sets the Finished condition to True and reports
// whether anything changed.
func SetFinishedCondition(j *shellv1alpha1.ShellJob, now time.Time, reason, msg string) bool {
	return setCondition(&j.Status.Conditions, j.Generation, now, shellv1alpha1.ShellJobFinished, metav1.ConditionTrue, reason, msg)
}

// SetAvailableCondition sets a pool's Available condition and reports
// whether anything changed.
func SetAvailableCondition(p *shellv1alpha1.ShellPool, now time.Time, status metav1.ConditionStatus, reason, msg string) bool {
	return setCondition(&p.Status.Conditions, p.Generation, now, shellv1alpha1.ShellPoolAvailable, status, reason, msg)
}

// SetPoolCondition sets condition typ of a pool (ShellPoolJobsIsolated,
// ShellPoolSpoolRoom), and reports whether it changed.
func SetPoolCondition(p *shellv1alpha1.ShellPool, now time.Time, typ string, status metav1.ConditionStatus, reason, msg string) bool {
	return setCondition(&p.Status.Conditions, p.Generation, now, typ, status, reason, msg)
}

// setCondition sets a condition as CAPI's conditions.Set does: it stamps
// ObservedGeneration, cuts the message to the API's limit, truncates the
// transition time to seconds (what the API keeps), and changes nothing when
// the condition is the same.
func setCondition(conds *[]metav1.Condition, generation int64, now time.Time, typ string, status metav1.ConditionStatus, reason, msg string) bool {
	if len(msg) > maxMessage {
		msg = strings.ToValidUTF8(msg[:maxMessage-len("…")], "") + "…"
	}
	return meta.SetStatusCondition(conds, metav1.Condition{
		Type:               typ,
		Status:             status,
		ObservedGeneration: generation,
		LastTransitionTime: metav1.NewTime(now.Truncate(time.Second)),
		Reason:             reason,
		Message:            msg,
	})
}
