package delivery

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"shelljob.dev/shelljob/bot/pace"
	"shelljob.dev/shelljob/bot/settings"
)

var t0 = time.Unix(1000, 0)

func at(d time.Duration) time.Time { return t0.Add(d) }

// open is an open draft preview of job #1, created at t0, that last showed
// "a" at 3 s: now is 3.5 s.
func open() State {
	return State{
		Now: at(3500 * time.Millisecond), Created: t0, Number: 1, Streaming: true, Private: true,
		Prefs: settings.Defaults, Preview: DraftPreview, Opened: true, OutputRead: true,
		Text: "a", Sent: "a", Next: at(4 * time.Second), Heartbeat: at(23 * time.Second),
	}
}

// fresh is a new job #1, created at t0, with no preview yet: now is 2 s.
func fresh() State {
	return State{Now: at(pace.PreviewDelay), Created: t0, Number: 1, Streaming: true, Private: true, Prefs: settings.Defaults}
}

func TestDecide(t *testing.T) {
	tests := map[string]struct {
		s    State
		edit func(*State)
		want Decision
	}{
		"before PreviewDelay": {fresh(), func(s *State) { s.Now = at(time.Second) },
			Decision{Until: at(pace.PreviewDelay)}},
		"no number yet":                      {fresh(), func(s *State) { s.Number = 0 }, Decision{}},
		"no number yet, before PreviewDelay": {fresh(), func(s *State) { s.Number, s.Now = 0, t0 }, Decision{}},
		"private chat opens a draft":         {fresh(), nil, Decision{Action: Open, Kind: DraftPreview}},
		"private chat set to edits": {fresh(), func(s *State) { s.Prefs.StreamPrivate = settings.Edits },
			Decision{Action: Open, Kind: EditPreview}},
		"group opens an edited message": {fresh(), func(s *State) { s.Private = false },
			Decision{Action: Open, Kind: EditPreview}},
		"group set to drafts": {fresh(), func(s *State) { s.Private, s.Prefs.StreamGroups = false, settings.Drafts },
			Decision{Action: Open, Kind: DraftPreview}},
		"guest answer taken over": {fresh(), func(s *State) { s.Private, s.Preview = false, GuestPreview },
			Decision{Action: Open, Kind: GuestPreview}},
		"resumed edited preview awaits output": {fresh(), func(s *State) { s.Resumed, s.Preview = true, EditPreview },
			Decision{}},
		"resumed preview with output taken over": {fresh(), func(s *State) { s.Resumed, s.Preview, s.OutputRead = true, EditPreview, true },
			Decision{Action: Open, Kind: EditPreview}},
		"resumed preview of an empty output taken over": {fresh(), func(s *State) { s.Resumed, s.Preview, s.Complete = true, DraftPreview, true },
			Decision{Action: Open, Kind: DraftPreview}},
		"ended before its preview": {fresh(), func(s *State) { s.Ended = true }, Decision{}},
		"over before its preview":  {fresh(), func(s *State) { s.Ended, s.Over = true, true }, Decision{Action: Final}},
		"over before PreviewDelay": {fresh(), func(s *State) { s.Now, s.Ended, s.Over = t0, true, true },
			Decision{Action: Final}},
		"streaming off":       {fresh(), func(s *State) { s.Streaming = false }, Decision{}},
		"streaming off, over": {fresh(), func(s *State) { s.Streaming, s.Over = false, true }, Decision{Action: Final}},
		"preview failed":      {fresh(), func(s *State) { s.Failed = true }, Decision{}},
		"preview failed, over": {fresh(), func(s *State) { s.Failed, s.Over = true, true },
			Decision{Action: Final}},

		"unchanged draft waits for its heartbeat": {open(), nil, Decision{Until: at(23 * time.Second)}},
		"unchanged edited preview waits for a change": {open(), func(s *State) { s.Preview, s.Heartbeat = EditPreview, time.Time{} },
			Decision{}},
		"changed before the pace waits for it": {open(), func(s *State) { s.Text = "ab" },
			Decision{Until: at(4 * time.Second)}},
		"changed at the pace is sent": {open(), func(s *State) { s.Text, s.Now = "ab", at(4*time.Second) },
			Decision{Action: Draft}},
		"changed edited preview at the pace is edited": {open(), func(s *State) { s.Text, s.Now, s.Preview = "ab", at(5*time.Second), EditPreview },
			Decision{Action: Edit}},
		"changed guest answer at the pace is edited": {open(), func(s *State) { s.Text, s.Now, s.Preview = "ab", at(5*time.Second), GuestPreview },
			Decision{Action: Edit}},
		"heartbeat due": {open(), func(s *State) { s.Now = at(23 * time.Second) }, Decision{Action: Draft}},
		"heartbeat due before the pace after failures": {open(), func(s *State) { s.Now, s.Next = at(23*time.Second), at(time.Minute) },
			Decision{Action: Draft}},
		"changed, heartbeat before the pace after failures": {open(), func(s *State) { s.Text, s.Next = "ab", at(time.Minute) },
			Decision{Until: at(23 * time.Second)}},
		"ended: the final takes its place": {open(), func(s *State) { s.Text, s.Now, s.Ended = "ab", at(30*time.Second), true },
			Decision{}},
		"over": {open(), func(s *State) { s.Text, s.Now, s.Ended, s.Over = "ab", at(30*time.Second), true, true },
			Decision{Action: Final}},
	}
	for name, tc := range tests {
		s := tc.s
		if tc.edit != nil {
			tc.edit(&s)
		}
		if got := Decide(s); got != tc.want {
			t.Errorf("%s: Decide = %+v, want %+v", name, got, tc.want)
		}
	}
}

func TestPace(t *testing.T) {
	tests := []struct {
		k       Kind
		private bool
		want    pace.Kind
	}{
		{EditPreview, true, pace.PrivateEdits},
		{EditPreview, false, pace.GroupEdits},
		{GuestPreview, true, pace.PrivateEdits},
		{GuestPreview, false, pace.GroupEdits},
		{DraftPreview, true, pace.Draft},
		{DraftPreview, false, pace.Draft},
	}
	for _, tc := range tests {
		if got := Pace(tc.k, tc.private); got != tc.want {
			t.Errorf("Pace(%v, %v) = %v, want %v", tc.k, tc.private, got, tc.want)
		}
	}
}

// TestDraftLife walks a private chat's job through its life on a fake
// clock, applying each decision as the pump does, with a pacer: the draft
// opens at 2 s, changes at the pace, is sent again at its heartbeat, then
// stays until the final.
func TestDraftLife(t *testing.T) {
	c := clocktesting.NewFakePassiveClock(t0)
	s := State{Created: t0, Streaming: true, Private: true, Prefs: settings.Defaults}
	var p *pace.Pacer
	type step struct {
		at    time.Duration
		apply func()
		want  Decision
	}
	steps := []step{
		{0, nil, Decision{}},
		{100 * time.Millisecond, func() { s.Number = 1 }, Decision{Until: at(2 * time.Second)}},
		{2 * time.Second, func() { s.Text = "a" }, Decision{Action: Open, Kind: DraftPreview}},
		{2 * time.Second, func() {
			s.Preview, s.Opened, s.Sent = DraftPreview, true, s.Text
			p = pace.New(c, Pace(DraftPreview, s.Private), t0)
			p.Done(true)
		}, Decision{Until: at(22 * time.Second)}},
		{2500 * time.Millisecond, func() { s.Text = "ab" }, Decision{Until: at(3 * time.Second)}},
		{3 * time.Second, nil, Decision{Action: Draft}},
		{3 * time.Second, func() { s.Sent = s.Text; p.Done(true) }, Decision{Until: at(23 * time.Second)}},
		{23 * time.Second, nil, Decision{Action: Draft}},
		{23 * time.Second, func() { p.Done(false) }, Decision{Until: at(43 * time.Second)}},
		{25 * time.Second, func() { s.Text = "abc" }, Decision{Action: Draft}},
		{25 * time.Second, func() { s.Sent = s.Text; p.Done(true) }, Decision{Until: at(45 * time.Second)}},
		{26 * time.Second, func() { s.Text, s.Ended = "abcd", true }, Decision{}},
		{27 * time.Second, func() { s.Over = true }, Decision{Action: Final}},
	}
	for i, st := range steps {
		c.SetTime(at(st.at))
		s.Now = c.Now()
		if st.apply != nil {
			st.apply()
		}
		if p != nil {
			s.Next, s.Heartbeat = p.Next(), p.Heartbeat()
		}
		if got := Decide(s); got != st.want {
			t.Fatalf("step %d at %v: Decide = %+v, want %+v", i, st.at, got, st.want)
		}
	}
}
