// Package texts holds every text shelljob shows to a user, in the chat and
// in the terminal alike, verbatim from the reference
// (reference/shell_streaming.md), so that a change of wording happens in one
// place.
package texts

import (
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/outfiles"
	"shelljob.dev/shelljob/internal/shelljob"
	"shelljob.dev/shelljob/internal/utf16text"
)

// Preview headers and cursor.
const (
	// Cursor ends the tail of a running command's output in a preview.
	Cursor = "▌"
	// StopHint follows the header of a preview that has no Stop button.
	StopHint = " · .k to stop"
	// GuestStopHintFormat follows the header of a guest answer, which never
	// has a button: " · @bot .k to stop".
	GuestStopHintFormat = " · @%s .k to stop"
	// StopButton is the label of an edited preview's inline button.
	StopButton = "⏹ Stop"
	// GuestRunning is a guest answer when it is posted.
	GuestRunning = "⏳ Running…"
)

// HeaderRunning is "⏳ #3".
func HeaderRunning(n int64) string { return fmt.Sprintf("⏳ #%d", n) }

// HeaderQueued is "⏳ #3 waiting for a free shell".
func HeaderQueued(n int64) string { return fmt.Sprintf("⏳ #%d waiting for a free shell", n) }

// HeaderStopping is "⏹ #3 stopping…".
func HeaderStopping(n int64) string { return fmt.Sprintf("⏹ #%d stopping…", n) }

// Finals.
const (
	// LongFinalHead is the first line of a preview that became the end of a
	// final too long for one message; the .txt file follows.
	LongFinalHead = "✂️ The full output is in the file below."
	// FinishedBelow replaces a preview that could not be deleted after a
	// final sent as a new reply.
	FinishedBelow = "Finished; output below."
	// StoppedBeforeRun is a dropped job's final after a stop by the user.
	StoppedBeforeRun = "⏹ Stopped before it ran."
	// StoppedBeforeRunShutdown is a dropped job's final after a shutdown.
	StoppedBeforeRunShutdown = "⏹ Stopped before it ran: the bot is going offline."
	// GuestStopped follows "exit N" in a guest answer stopped by the user.
	GuestStopped = "⏹ Stopped"
	// GuestStoppedShutdown follows "exit N" in a guest answer after a shutdown.
	GuestStoppedShutdown = "⏹ Stopped: the bot is going offline"
	// WorkerLost ends the final of a job whose worker went away while it
	// ran: what the bot had read of its output is all there is.
	WorkerLost = "⚠ The worker was lost: the command's output may be cut."
	// OutputCut ends the final of a job that has ended but whose output
	// could not be read to its end.
	OutputCut = "⚠ The output could not be read to its end."
	// OutputFileName is the name of the .txt file of a long final.
	OutputFileName = "output.txt"
)

// WorkerEnded ends the final of a job that its worker's limits ended
// (evicted, out of memory), with the operator's account of it.
func WorkerEnded(why string) string {
	if why == "" {
		return WorkerLost
	}
	return "⚠ " + strings.ToUpper(why[:1]) + why[1:] + "."
}

// EndNote is the note a final ends with when the job ended because of its
// worker or its hold (shelljob.End.ByWorker), or never ran for its
// approval (denied, expired): "" otherwise.
func EndNote(e shelljob.End) string {
	switch byWorker, _ := e.ByWorker(); {
	case e.NotApproved:
		return approvalNote(e.Reason, e.Message)
	case !byWorker:
		return ""
	case e.Reason == shellv1alpha1.ShellJobFinishedReasonWorkerLost:
		return WorkerLost
	}
	return WorkerEnded(e.Message)
}

// ProcessExited is the final of a command with no output.
func ProcessExited(code int) string { return fmt.Sprintf("The process exited %d.", code) }

// StoppedNote is the stop note after a stop by the user: "⏹ Stopped (exit 130)."
func StoppedNote(code int) string { return fmt.Sprintf("⏹ Stopped (exit %d).", code) }

// StoppedShutdownNote is the stop note after a shutdown.
func StoppedShutdownNote(code int) string {
	return fmt.Sprintf("⏹ Stopped: the bot is going offline (exit %d).", code)
}

// GuestExit is the line under a guest answer's output: "exit N".
func GuestExit(code int) string { return fmt.Sprintf("exit %d", code) }

// .k replies and Stop button toasts.
const (
	NoRunning        = "No running command here."
	NoRunningInReply = "That message has no running command."
	OnlyAdmins       = "Only the bot's admins can do that."
	ButtonOutOfDate  = "That button is out of date."
	NotAvailable     = "Not available here."
	// NULCommand answers a command that holds a NUL byte, which no shell
	// can be given as an argument.
	NULCommand = "The command holds a NUL byte, which a shell cannot run."
	// SubmitFailed answers a command whose job could not be created.
	SubmitFailed = "Could not start the command: %v"
)

// JobNameTaken answers a command whose job name (shelljob.TelegramName)
// an object that is not its job holds: someone made it to have their
// own command taken for the chat's. The command runs as renamed instead.
func JobNameTaken(name, renamed string) string {
	return fmt.Sprintf("⚠ The job name %s is taken by an object that is not this command's job: it is left alone, and nothing of it is shown here. The command runs as %s.", name, renamed)
}

// QuotaFull answers a command refused because the namespace holds as many
// ShellJobs as its quota allows (the chart's jobQuota).
func QuotaFull(limit int64) string {
	const rest = " is full. Finished jobs count until they expire; try again once older ones have gone, or raise the chart's jobQuota.shellJobs."
	return plural(int(limit), "Could not start the command: the quota of %d job"+rest, "Could not start the command: the quota of %d jobs"+rest)
}

// Stopping is "⏹ Stopping #3…" (shelljob.StopOutcome.Text).
func Stopping(n int64) string { return shelljob.StopSent.Text(n) }

// AlreadyStopping is "#3 is already stopping.".
func AlreadyStopping(n int64) string { return shelljob.StopAlreadyRequested.Text(n) }

// AlreadyEnded is "#3 has already ended.".
func AlreadyEnded(n int64) string { return shelljob.StopAlreadyEnded.Text(n) }

// FilesStopped answers a .k on a job whose files were being sent: the
// rest are not sent.
func FilesStopped(n int64) string { return fmt.Sprintf("⏹ Stopped sending the files of #%d.", n) }

// StopFailed says that a stop of #n failed, and why: the API server's own
// message where it gave one.
func StopFailed(n int64, err error) string {
	why := err.Error()
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Message != "" {
		why = status.Status().Message
	}
	return fmt.Sprintf("⚠ Could not stop #%d: %s\n.k tries again.", n, why)
}

// StopRefused says that the API server refused a stop of job #n (named
// name), in the words of the admission policy that refused it (why):
// "⚠ Could not stop #3: it is alice's job; you may not stop others' jobs
// on pool dev.". A .k would meet the same refusal: none is offered.
func StopRefused(n int64, name, why string) string {
	for _, job := range []string{fmt.Sprintf("#%d", n), name} {
		if rest, ok := strings.CutPrefix(why, job+" is "); ok && job != "" {
			why = "it is " + rest
			break
		}
	}
	return fmt.Sprintf("⚠ Could not stop #%d: %s", n, strings.TrimSuffix(why, ".")+".")
}

// NoSuchJob answers .k N for a job that is not visible and running.
func NoSuchJob(n int64) string { return fmt.Sprintf("No running command #%d here.", n) }

// KillUsage is the usage line of .k; kill is ".k" or "@bot .k".
func KillUsage(kill string) string {
	return fmt.Sprintf("Usage: %[1]s (alone or as a reply), %[1]s N, %[1]s all, %[1]s ls", kill)
}

// SeveralRunning heads the list that a bare .k shows when several jobs run.
func SeveralRunning(kill string) string {
	return fmt.Sprintf("Several commands are running; %s N stops one, %s all stops them all:", kill, kill)
}

// Old-pool notes, the reply to .x, .xf and .sbb. Each names the pool
// when pool is set (the chat sees jobs of more than one), and speaks of
// "the shell pool" otherwise.

// PoolRestarted heads the reply: "Restarted the shell pool." or
// "Restarted pool dev.".
func PoolRestarted(pool string) string {
	if pool == "" {
		return "Restarted the shell pool."
	}
	return "Restarted pool " + pool + "."
}

// RestartFailed says that a restart failed, and why.
func RestartFailed(err error) string { return fmt.Sprintf("Could not restart the shell pool: %v", err) }

// PoolNamed is how a list names a job's pool: "pool dev".
func PoolNamed(pool string) string { return "pool " + pool }

// OldPoolHere counts the jobs a .k here can see on old pools.
func OldPoolHere(n int, pool string) string {
	return plural(n, "%d command is queued or running on "+oldPool(false, pool)+"; .k stops it.",
		"%d commands are queued or running on "+oldPool(true, pool)+"; .k stops them.")
}

// OldPoolOtherChat counts the jobs in other chats on old pools.
func OldPoolOtherChat(n int, pool string) string {
	return plural(n, "%d command in another chat is queued or running on "+oldPool(false, pool)+"; .k in that chat stops it.",
		"%d commands in other chats are queued or running on "+oldPool(true, pool)+"; .k in those chats stops them.")
}

// OldPoolGuest counts the caller's guest jobs on old pools.
func OldPoolGuest(n int, bot, pool string) string {
	return plural(n, "%d guest command is queued or running on "+oldPool(false, pool)+"; @"+bot+" .k in its chat stops it.",
		"%d guest commands are queued or running on "+oldPool(true, pool)+"; @"+bot+" .k in their chats stops them.")
}

// OldPoolOtherAdmin counts the jobs the caller cannot reach.
func OldPoolOtherAdmin(n int, pool string) string {
	return plural(n, "%d command of another admin is queued or running on "+oldPool(false, pool)+"; they can stop it.",
		"%d commands of other admins are queued or running on "+oldPool(true, pool)+"; they can stop them.")
}

// oldPool is where the old-pool notes' jobs run: "an old pool", "old
// pools", or "old workers of pool dev".
func oldPool(many bool, pool string) string {
	switch {
	case pool != "":
		return "old workers of pool " + pool
	case many:
		return "old pools"
	}
	return "an old pool"
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf(one, n)
	}
	return fmt.Sprintf(many, n)
}

// Settings.
const (
	SettingsInPrivate = "The settings panel is in the private chat with the bot: send /settings there."
	SettingsUsage     = "Usage: /settings private drafts|edits, /settings groups drafts|edits, /settings final edit|reply, /settings render on|off"
	SettingsSaveFail  = "Could not save that setting; try again."
	SettingsOutOfDate = "That button is out of date; send /settings for a new panel."
)

// Files in and out. These are the bot's own: the reference sends files
// with no limit.
const (
	// FilesNotDelivered ends the final of a job whose files an earlier run
	// of the bot began to send and never finished (it crashed or was
	// killed): they are not sent again, so that they cannot crash it again.
	FilesNotDelivered = "⚠ The files in $SHELLJOB_OUT were not sent: an earlier attempt did not finish."
	// FinalNotSent ends the final of a job that an earlier run of the bot
	// began to deliver and never finished (it crashed or was killed): the
	// final goes out without the output, which could take it down again.
	FinalNotSent = "⚠ The output could not be sent: an earlier attempt to send this final did not finish."
	// FinalNotRecorded ends the final of a job whose delivery the bot
	// could not record on it (the API server refused the annotation): a
	// final that could take the bot down is sent with nothing of the
	// output unless its attempt is on record, where the next run sees it.
	FinalNotRecorded = "⚠ The output could not be sent: the cluster refused to record this final's delivery."
	// FilesNotRecorded is the note of a job whose files are not sent
	// because the cluster refused to record the attempt, without which a
	// bot killed sending them would send them again.
	FilesNotRecorded = "⚠ The files in $SHELLJOB_OUT were not sent: the cluster refused to record their delivery."
	// InFilesNotPut ends the final of a job whose replied-to files could
	// not be put into its directory: it is stopped before it runs.
	InFilesNotPut = "⚠ The replied-to files could not be put in place; the command did not run. Send it again."
	// HeldAtRestart ends the final of a job that waited for its replied-to
	// files when the bot restarted: they are gone with the old bot, and the
	// command did not run.
	HeldAtRestart = "⚠ The bot restarted before the replied-to files were in place; the command did not run. Send it again."
)

// InFileTooBig answers a command whose replied-to file is over the limit:
// nothing is downloaded and the command does not run.
func InFileTooBig(name string, size, limit int64) string {
	return fmt.Sprintf("📎 %s is %s, over the %s limit for a replied-to file; the command did not run.", name, Size(size), Size(limit))
}

// InFileFailed answers a command whose replied-to file could not be
// downloaded: the command does not run without it.
func InFileFailed(err error) string {
	return fmt.Sprintf("📎 Could not download the replied-to file (%v); the command did not run. Send it again.", err)
}

// OutFileTooBig names a $SHELLJOB_OUT file not sent for its size.
func OutFileTooBig(name string, size, limit int64) string {
	return fmt.Sprintf("%s (%s, over the %s limit for one file)", name, Size(size), Size(limit))
}

// OutJobTooBig names a $SHELLJOB_OUT file not sent because the job's files
// before it reached the limit for one job.
func OutJobTooBig(name string, size, limit int64) string {
	return fmt.Sprintf("%s (%s, past the %s limit for a command's files)", name, Size(size), Size(limit))
}

// OutFileBadName names a $SHELLJOB_OUT file not sent because its name,
// as the worker gave it, is no path inside the directory.
func OutFileBadName(name string) string {
	return fmt.Sprintf("%q (not a path inside $SHELLJOB_OUT)", name)
}

// OutFileSkipped names a $SHELLJOB_OUT file left out for its size or its
// name, as name, with the reason s gives against l.
func OutFileSkipped(name string, s outfiles.Skip, l outfiles.Limits) string {
	switch s.Why {
	case outfiles.TooBig:
		return OutFileTooBig(name, s.Size, l.File)
	case outfiles.JobFull:
		return OutJobTooBig(name, s.Size, l.Job)
	}
	return OutFileBadName(s.Name)
}

// OutFileNotSent names a $SHELLJOB_OUT file that Telegram did not take,
// and why (its error, as "Telegram: MEDIA_EMPTY").
func OutFileNotSent(name, why string) string {
	return fmt.Sprintf("%s (could not be sent: %s)", name, cut(why))
}

// FilesUnread adds to note, the note on the files not sent (FilesNotSent,
// "" for none), that the job's files could not all be read from its
// worker.
func FilesUnread(note string, err error) string {
	line := fmt.Sprintf("any files past those sent and listed: they could not be read (%s)", cut(err.Error()))
	if note == "" {
		return FilesSkipped([]string{line})
	}
	return note + "\n" + line
}

// maxErrorText is how much of an error a note quotes, in Telegram's
// UTF-16 units: ten of them and the note's names fit in one chat message.
const maxErrorText = 160

// cut is an error's text for a note, cut to maxErrorText.
func cut(why string) string { return cutTo(why, maxErrorText) }

// cutTo is s cut to units UTF-16 units, with "…" where it was cut.
func cutTo(s string, units int) string {
	if utf16text.Len(s) <= units {
		return s
	}
	return utf16text.Head(s, units-utf16text.Len("…")) + "…"
}

// FilesSkipped is the note that lists the files not sent, one a line.
func FilesSkipped(lines []string) string {
	return "⚠ Not sent from $SHELLJOB_OUT:\n" + strings.Join(lines, "\n")
}

// FilesUnlisted ends the list of the files not sent when more were left
// out than it names.
func FilesUnlisted(n int) string { return fmt.Sprintf("…and %s.", moreFiles(n)) }

// FilesOverCount counts the files not sent because the command had sent
// as many as it may: "12 more files not sent: a command sends at most 100."
func FilesOverCount(n, limit int) string {
	return fmt.Sprintf("%s not sent: a command sends at most %d.", moreFiles(n), limit)
}

// FilesNotSent is the note on the files of $SHELLJOB_OUT not sent: the
// files named, one a line (OutFileSkipped), how many more were left out
// for their size past those, and how many past the count of files; ""
// when none was left out.
func FilesNotSent(named []string, unlisted, overCount, countLimit int) string {
	lines := named
	if unlisted > 0 {
		lines = append(lines, FilesUnlisted(unlisted))
	}
	if overCount > 0 {
		if len(lines) == 0 {
			return "⚠ " + FilesOverCount(overCount, countLimit)
		}
		lines = append(lines, FilesOverCount(overCount, countLimit))
	}
	if len(lines) == 0 {
		return ""
	}
	return FilesSkipped(lines)
}

// moreFiles is "1 more file" or "12 more files".
func moreFiles(n int) string {
	if n == 1 {
		return "1 more file"
	}
	return fmt.Sprintf("%d more files", n)
}

// Size is a byte count for people: "512 bytes", "1.5 KB", "400.0 MB", in
// units of 1024.
func Size(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d bytes", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 3; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %cB", float64(n)/float64(div), "KMGT"[exp])
}
