// Package preview composes the texts the bot shows of a command's output:
// the live preview (a header, the output's end and a cursor, within
// PreviewUnits UTF-16 units) and the final. It is pure: no I/O.
package preview

import (
	"strings"
	"unicode/utf8"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/texts"
	"shelljob.dev/shelljob/internal/utf16text"
)

const (
	// PreviewUnits bounds a preview, in UTF-16 units. A message holds 4096,
	// but a longer text could be split into a chain of messages where it
	// breaks well (a newline in its last 600 characters), and the second
	// message would outlive the preview; the room left also fits a draft's
	// heartbeat suffix.
	PreviewUnits = 3496
	// MessageUnits is what one Telegram message holds, in UTF-16 units.
	MessageUnits = 4096
	// CaptionUnits is what a media message's caption holds, in UTF-16
	// units.
	CaptionUnits = 1024
	// FileChars is the length, in characters, from which a final goes out
	// as a .txt file rather than as text (the rule of discreet_send).
	FileChars = 4000
)

// State is what a preview's header says of its job.
type State int

const (
	// Running: the command runs.
	Running State = iota
	// Queued: the job waits for a free shell.
	Queued
	// Stopping: the job was asked to stop and has not ended.
	Stopping
	// AwaitingApproval: the job waits for someone to approve or deny it.
	AwaitingApproval
	// WaitingOwn: the job waits for some of its author's other jobs to end
	// (its pool's maxRunningPerUser).
	WaitingOwn
)

// Header is the first line of a preview of job n; own is how many of its
// author's jobs a WaitingOwn job waits for. hint follows it where the
// preview has no Stop button (texts.StopHint, or the guest form).
func Header(n int64, s State, own int, hint string) string {
	var h string
	switch s {
	case Running:
		h = texts.HeaderRunning(n)
	case Queued:
		h = texts.HeaderQueued(n)
	case Stopping:
		h = texts.HeaderStopping(n)
	case AwaitingApproval:
		h = texts.HeaderAwaitingApproval(n)
	case WaitingOwn:
		h = texts.HeaderWaitingOwn(n, own)
	default:
		panic("preview: unknown state")
	}
	return h + hint
}

// Compose is a preview: the header, a blank line, the end of tail and the
// cursor, within PreviewUnits.
func Compose(header, tail string) string {
	room := PreviewUnits - utf16text.Len(header) - utf16text.Len("\n\n") - utf16text.Len(texts.Cursor)
	return header + "\n\n" + utf16text.Tail(Clean(tail), room) + texts.Cursor
}

// Clean makes text safe to send: NUL, which Telegram does not keep in a
// message, is shown as \x00.
func Clean(s string) string {
	if !strings.Contains(s, "\x00") {
		return s
	}
	return strings.ReplaceAll(s, "\x00", `\x00`)
}

// Stop says whether and why a job was stopped, for its final.
type Stop int

const (
	// NotStopped: the command ended by itself.
	NotStopped Stop = iota
	// StoppedByUser: .k, a Stop button or a draft's Stop.
	StoppedByUser
	// StoppedByShutdown: the bot went offline.
	StoppedByShutdown
	// NotApproved: the job never ran for its pool's approval: someone
	// denied it, or no one decided in time. Its note says which.
	NotApproved
)

// StopOf is the Stop a client's stop reason makes: a timeout, or no
// client's stop, is NotStopped.
func StopOf(r shellv1alpha1.StopReason) Stop {
	switch r {
	case shellv1alpha1.StopReasonUser:
		return StoppedByUser
	case shellv1alpha1.StopReasonShutdown:
		return StoppedByShutdown
	}
	return NotStopped
}

// Final is a chat job's final text: the output, trimmed, or "The process
// exited N." when it is empty, then after a blank line the stop note. A
// job that never ran (ran false) gets the stop note alone, and note after
// it when set; one that never ran for want of approval (NotApproved) gets
// its note alone ("⛔ Denied by bob."). A negative exitCode is unknown
// (the worker was lost): an empty output then says nothing. note, when
// set, ends the final after a blank line: why the output may be cut
// (texts.WorkerLost).
func Final(output string, exitCode int, ran bool, stop Stop, note string) string {
	if !ran && stop == NotApproved && note != "" {
		return note
	}
	if !ran {
		head := texts.StoppedBeforeRun
		if stop == StoppedByShutdown {
			head = texts.StoppedBeforeRunShutdown
		}
		if note != "" {
			return head + "\n\n" + note
		}
		return head
	}
	body := strings.TrimSpace(Clean(output))
	if body == "" && exitCode >= 0 {
		body = texts.ProcessExited(exitCode)
	}
	var lines []string
	if body != "" {
		lines = append(lines, body)
	}
	return strings.Join(append(lines, finalLines(exitCode, stop, note)...), "\n\n")
}

// finalLines are what a chat final shows under the output: the stop note
// and note.
func finalLines(exitCode int, stop Stop, note string) []string {
	var lines []string
	switch stop {
	case NotStopped, NotApproved:
	case StoppedByUser:
		lines = append(lines, texts.StoppedNote(exitCode))
	case StoppedByShutdown:
		lines = append(lines, texts.StoppedShutdownNote(exitCode))
	default:
		panic("preview: unknown stop")
	}
	if note != "" {
		lines = append(lines, note)
	}
	return lines
}

// LongFinalEnd is what follows the output in the final of a job that ran
// and whose output is too long to hold as one string: that final is the
// output, cleaned and trimmed as Final does and not empty, then this end.
// It is long (IsLong); LongHead of the output's end and this end is its
// message.
func LongFinalEnd(exitCode int, stop Stop, note string) string {
	return joinedEnd(strings.Join(finalLines(exitCode, stop, note), "\n\n"))
}

func joinedEnd(lines string) string {
	if lines == "" {
		return ""
	}
	return "\n\n" + lines
}

// IsLong tells whether a final goes out as a .txt file: from FileChars
// characters on.
func IsLong(final string) bool {
	return utf8.RuneCountInString(final) >= FileChars
}

// LongHead is the text a preview becomes when its final is long: the first
// line texts.LongFinalHead, a blank line, and the final's end, as much as
// fits one message.
func LongHead(final string) string {
	head := texts.LongFinalHead + "\n\n"
	return head + utf16text.Tail(final, MessageUnits-utf16text.Len(head))
}

// Guest is a guest answer's final: the output, trimmed and cut to fit one
// message (its end is kept), with "exit N" under it (none when the exit
// code is unknown, negative), the stop line after a stop and note when set.
// A job that never ran gets its note alone.
func Guest(output string, exitCode int, ran bool, stop Stop, note string) string {
	return guestText(output, exitCode, ran, stop, note, MessageUnits)
}

// GuestLong is the final of a guest answer whose output is long: the
// output.txt file, which holds the whole final (as Guest builds it, uncut),
// and the caption the answer shows over it, cut to fit CaptionUnits. ok is
// false when the final is not long (IsLong) or the job never ran: then
// Guest alone is the final.
func GuestLong(output string, exitCode int, ran bool, stop Stop, note string) (caption, file string, ok bool) {
	if !ran {
		return "", "", false
	}
	file = guestText(output, exitCode, ran, stop, note, -1)
	if !IsLong(file) {
		return "", "", false
	}
	return guestText(output, exitCode, ran, stop, note, CaptionUnits), file, true
}

// GuestLongEnd is what follows the output in the output.txt file of a
// guest answer whose output is too long to hold as one string (see
// LongFinalEnd); GuestCaption is its caption.
func GuestLongEnd(exitCode int, stop Stop, note string) string {
	return joinedEnd(guestLines(exitCode, stop, note))
}

// GuestCaption is the caption of a guest answer whose output is too long to
// hold as one string, from the end of the output, cleaned and trimmed as
// Guest does.
func GuestCaption(outputEnd string, exitCode int, stop Stop, note string) string {
	return guestJoin(outputEnd, guestLines(exitCode, stop, note), CaptionUnits)
}

// guestText builds a guest final within room UTF-16 units (-1: uncut).
func guestText(output string, exitCode int, ran bool, stop Stop, note string, room int) string {
	if !ran && stop == NotApproved {
		return Final("", exitCode, false, stop, note)
	}
	if !ran {
		return Final("", exitCode, false, stop, "")
	}
	return guestJoin(strings.TrimSpace(Clean(output)), guestLines(exitCode, stop, note), room)
}

// guestLines are what a guest final shows under the output.
func guestLines(exitCode int, stop Stop, note string) string {
	var ls []string
	if exitCode >= 0 {
		ls = append(ls, texts.GuestExit(exitCode))
	}
	switch stop {
	case NotStopped, NotApproved:
	case StoppedByUser:
		ls = append(ls, texts.GuestStopped)
	case StoppedByShutdown:
		ls = append(ls, texts.GuestStoppedShutdown)
	default:
		panic("preview: unknown stop")
	}
	if note != "" {
		ls = append(ls, note)
	}
	return strings.Join(ls, "\n")
}

// guestJoin puts lines under body, the end of body cut to fit room UTF-16
// units in all (-1: uncut).
func guestJoin(body, lines string, room int) string {
	if body == "" {
		return lines
	}
	if lines == "" {
		if room >= 0 {
			body = utf16text.Tail(body, room)
		}
		return body
	}
	if room >= 0 {
		body = utf16text.Tail(body, room-utf16text.Len(lines)-2)
	}
	return body + "\n\n" + lines
}
