// Package delivery decides what a job's pump does next: open the job's
// preview, edit it, send it again as a draft, deliver the final, or wait.
// It is pure, as internal/scheduler is: Decide takes a snapshot of the job,
// its preview, the owner's settings and the time, and returns a Decision,
// with no client and no clock. The pump builds the snapshot and applies the
// decision through the Telegram client.
//
// The rules:
//   - The final goes out once the job is over: ended, and its output read
//     or given up.
//   - No preview while streaming is off or after the preview could not be
//     opened: only the final goes out.
//   - A preview shows PreviewDelay after the job was created, so a quick
//     command costs one message, and only once the job has its number,
//     which the preview shows. Once the job ended, the final is about to
//     take the preview's place: it changes no more.
//   - A resumed preview waits for the first output before its first edit,
//     which would otherwise blank it.
//   - An open preview changes at its pacer's pace when its text changed,
//     and a draft is sent again at its heartbeat even if unchanged.
package delivery

import (
	"time"

	"shelljob.dev/shelljob/bot/pace"
	"shelljob.dev/shelljob/bot/settings"
)

// Kind is how a job's preview shows.
type Kind int

const (
	// NoPreview: none yet.
	NoPreview Kind = iota
	// EditPreview: a reply to the command, edited in place.
	EditPreview
	// DraftPreview: a draft in the chat.
	DraftPreview
	// GuestPreview: the answer to a guest query, edited in place.
	GuestPreview
)

// Pace is the pace of a preview of kind k; private tells whether its chat
// is a private one (for a guest answer, whether it was asked in one).
func Pace(k Kind, private bool) pace.Kind {
	switch {
	case k == DraftPreview:
		return pace.Draft
	case private:
		return pace.PrivateEdits
	default:
		return pace.GroupEdits
	}
}

// Action is what the pump does next.
type Action int

const (
	// Wait for a change of the job or its output, or until the decision's
	// Until.
	Wait Action = iota
	// Open shows the preview for the first time, as the decision's Kind, or
	// takes over the one the job has (State.Preview).
	Open
	// Edit edits the preview (a message or a guest answer) to the text.
	Edit
	// Draft sends the draft with the text.
	Draft
	// Final delivers the final.
	Final
)

// Decision is what the pump does next.
type Decision struct {
	Action Action
	// Kind is the preview to open (Open).
	Kind Kind
	// Until is when to decide again even if nothing changed (Wait); the
	// zero time: only once something changes.
	Until time.Time
}

// State is what the decision needs of one job now.
type State struct {
	Now time.Time
	// Created is when the job was created.
	Created time.Time
	// Number is the job's #N, 0 until the operator assigns it.
	Number int64
	// Ended: the job's phase is final.
	Ended bool
	// Over: the job ended and its output was read to its end, or given
	// up.
	Over bool
	// Streaming: the bot shows live previews.
	Streaming bool
	// Private: the job's chat is a private one; for a guest answer,
	// whether it was asked in one.
	Private bool
	// Prefs are the job's owner's settings.
	Prefs settings.Prefs
	// Preview is the job's preview: NoPreview until one is opened, or the
	// guest answer, or the one a previous run of the bot left.
	Preview Kind
	// Opened: the preview was opened or taken over; Text, Sent, Next and
	// Heartbeat count only from then on.
	Opened bool
	// Failed: the preview could not be opened.
	Failed bool
	// Resumed: the job was picked up after a restart of the bot.
	Resumed bool
	// OutputRead: some output was read.
	OutputRead bool
	// Complete: the output was read to its end.
	Complete bool
	// Text is what the preview should show now; Sent is what it shows.
	Text, Sent string
	// Next is the pacer's earliest time for the next update; Heartbeat is
	// when a draft is sent again even if unchanged, the zero time for
	// other kinds.
	Next, Heartbeat time.Time
}

// Decide is what to do next for the job of s.
func Decide(s State) Decision {
	switch {
	case s.Over:
		return Decision{Action: Final}
	case !s.Streaming || s.Failed || s.Number == 0 || s.Ended:
		return Decision{}
	case s.Now.Before(s.Created.Add(pace.PreviewDelay)):
		return Decision{Until: s.Created.Add(pace.PreviewDelay)}
	case !s.Opened:
		if awaitingOutput(s) {
			return Decision{}
		}
		return Decision{Action: Open, Kind: opening(s)}
	}
	beat := !s.Heartbeat.IsZero() && !s.Now.Before(s.Heartbeat)
	switch {
	case beat || (s.Text != s.Sent && !s.Now.Before(s.Next)):
		if s.Preview == DraftPreview {
			return Decision{Action: Draft}
		}
		return Decision{Action: Edit}
	case s.Text == s.Sent:
		return Decision{Until: s.Heartbeat}
	case !s.Heartbeat.IsZero() && s.Heartbeat.Before(s.Next):
		return Decision{Until: s.Heartbeat}
	default:
		return Decision{Until: s.Next}
	}
}

// awaitingOutput tells whether a resumed preview waits for output before
// its first edit: the output was not read yet. (The job's status counts
// its output only once it ended, so a running job's output may be there
// all the same.)
func awaitingOutput(s State) bool {
	return s.Resumed && !s.OutputRead && !s.Complete
}

// opening is the kind of preview to open: the one the job has, else a
// draft or an edited message, as the owner set for the chat's kind.
func opening(s State) Kind {
	if s.Preview != NoPreview {
		return s.Preview
	}
	mode := s.Prefs.StreamGroups
	if s.Private {
		mode = s.Prefs.StreamPrivate
	}
	if mode == settings.Drafts {
		return DraftPreview
	}
	return EditPreview
}
