// Package settings holds each admin's shell settings: how previews show in
// private chats and in groups, what a command that showed a preview sends
// when it ends, and whether output is rendered as a terminal would show
// it. One parser serves the /settings text forms and the panel's buttons.
package settings

import (
	"fmt"
	"strings"
)

// StreamMode is how a preview shows.
type StreamMode string

const (
	// Drafts: a draft, in private chats only.
	Drafts StreamMode = "drafts"
	// Edits: a reply that is edited.
	Edits StreamMode = "edits"
)

// FinalMode is what a command that showed a preview sends when it ends.
type FinalMode string

const (
	// EditPreview: the preview becomes the final.
	EditPreview FinalMode = "edit"
	// NewReply: the final is a new reply, and the preview goes away.
	NewReply FinalMode = "reply"
)

// Prefs are one admin's settings.
type Prefs struct {
	StreamPrivate StreamMode
	StreamGroups  StreamMode
	Final         FinalMode
	Render        bool
}

// Defaults are the settings of an admin who never chose.
var Defaults = Prefs{StreamPrivate: Drafts, StreamGroups: Edits, Final: EditPreview, Render: true}

// Setting names one setting, as the text form and button data spell it.
type Setting string

const (
	Private Setting = "private"
	Groups  Setting = "groups"
	Final   Setting = "final"
	Render  Setting = "render"
)

// Change sets one setting to one value.
type Change struct {
	Setting Setting
	Value   string
}

// values are the words each setting takes, in panel order.
var values = map[Setting][]string{
	Private: {string(Drafts), string(Edits)},
	Groups:  {string(Drafts), string(Edits)},
	Final:   {string(EditPreview), string(NewReply)},
	Render:  {"on", "off"},
}

// ParseChange reads the words of a change, in any letter case:
// ["groups", "drafts"], from "/settings groups drafts" or "shs:groups:drafts".
func ParseChange(words []string) (Change, bool) {
	if len(words) != 2 {
		return Change{}, false
	}
	s := Setting(strings.ToLower(words[0]))
	v := strings.ToLower(words[1])
	for _, ok := range values[s] {
		if v == ok {
			return Change{Setting: s, Value: v}, true
		}
	}
	return Change{}, false
}

// ParseText reads the argument of /settings: words separated by any blanks.
func ParseText(arg string) (Change, bool) { return ParseChange(strings.Fields(arg)) }

// DataPrefix starts the callback data of the panel's buttons.
const DataPrefix = "shs:"

// ParseData reads a button's callback data.
func ParseData(data string) (Change, bool) {
	rest, ok := strings.CutPrefix(data, DataPrefix)
	if !ok {
		return Change{}, false
	}
	return ParseChange(strings.Split(rest, ":"))
}

// Data is the callback data of a button for c.
func (c Change) Data() string { return DataPrefix + string(c.Setting) + ":" + c.Value }

// Apply returns p with c made.
func (p Prefs) Apply(c Change) Prefs {
	switch c.Setting {
	case Private:
		p.StreamPrivate = StreamMode(c.Value)
	case Groups:
		p.StreamGroups = StreamMode(c.Value)
	case Final:
		p.Final = FinalMode(c.Value)
	case Render:
		p.Render = c.Value == "on"
	default:
		panic("settings: unknown setting " + string(c.Setting))
	}
	return p
}

// Value is the current value word of setting s.
func (p Prefs) Value(s Setting) string {
	switch s {
	case Private:
		return string(p.StreamPrivate)
	case Groups:
		return string(p.StreamGroups)
	case Final:
		return string(p.Final)
	case Render:
		if p.Render {
			return "on"
		}
		return "off"
	default:
		panic("settings: unknown setting " + string(s))
	}
}

// scopeNames and valueNames are the words the panel and toasts show.
var (
	scopeNames = map[Setting]string{Private: "Private chats", Groups: "Groups", Final: "When it ends", Render: "Renderer"}
	valueNames = map[string]string{"drafts": "Drafts", "edits": "Edits", "edit": "Edit the preview", "reply": "New reply", "on": "On", "off": "Off"}
)

// Toast names the new value of a change: "Groups: Drafts.".
func (c Change) Toast() string {
	return fmt.Sprintf("%s: %s.", scopeNames[c.Setting], valueNames[c.Value])
}

// Button is one button of the panel.
type Button struct {
	Text string
	Data string
}

// Rows are the panel's button rows, one per setting; the current value is
// marked with "✓ ".
func (p Prefs) Rows() [][]Button {
	var rows [][]Button
	for _, s := range []Setting{Private, Groups, Final, Render} {
		var row []Button
		for _, v := range values[s] {
			text := scopeNames[s] + ": " + valueNames[v]
			if s == Private || s == Groups {
				text = shortScope[s] + ": " + valueNames[v]
			}
			if p.Value(s) == v {
				text = "✓ " + text
			}
			row = append(row, Button{Text: text, Data: Change{Setting: s, Value: v}.Data()})
		}
		rows = append(rows, row)
	}
	return rows
}

var shortScope = map[Setting]string{Private: "Private", Groups: "Groups"}

// Panel is the text of the settings panel: what each setting does, what
// it costs, and its current value.
func (p Prefs) Panel() string {
	return fmt.Sprintf(`Shell settings

Live output in private chats: %s
Live output in groups: %s
Drafts show the output as a draft with a Stop button. While a bot's draft is live, Telegram for Android disables the send button, so under Drafts a long command keeps you from typing until you press Stop (or choose Edits). Edits show it in a reply that changes, with a ⏹ Stop button. Groups cannot show drafts.

When it ends: %s
Edit the preview finishes an edited preview silently, with no notification, while a draft becomes a new message. New reply sends the output as a new message, which notifies.

Renderer: %s
On shows output as a terminal would: a progress bar shows its last frame, and colours are dropped. It also applies to your guest answers.`,
		valueNames[p.Value(Private)], valueNames[p.Value(Groups)], valueNames[p.Value(Final)], valueNames[p.Value(Render)])
}
