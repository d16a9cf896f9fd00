package bot

import (
	"context"

	"shelljob.dev/shelljob/bot/settings"
	"shelljob.dev/shelljob/internal/texts"
)

func panelButtons(p settings.Prefs) [][]Button {
	var rows [][]Button
	for _, r := range p.Rows() {
		var row []Button
		for _, b := range r {
			row = append(row, Button{Text: b.Text, Data: b.Data})
		}
		rows = append(rows, row)
	}
	return rows
}

// settingsCommand answers /settings: the panel in a private chat, a
// pointer to it in a group; a text form changes one setting first.
func (b *Bot) settingsCommand(ctx context.Context, m Message, arg string) error {
	if !m.Chat.Private() {
		return b.reply(ctx, m, texts.SettingsInPrivate)
	}
	p, err := b.settings.Get(ctx, m.From)
	if err != nil {
		b.cfg.Log.Error(err, "Could not read settings", "user", m.From)
	}
	if arg != "" {
		c, ok := settings.ParseText(arg)
		if !ok {
			return b.reply(ctx, m, texts.SettingsUsage)
		}
		p = p.Apply(c)
		if err := b.settings.Set(ctx, m.From, p); err != nil {
			b.cfg.Log.Error(err, "Could not save a setting", "user", m.From)
			return b.reply(ctx, m, texts.SettingsSaveFail)
		}
	}
	_, err = b.tg.Reply(m).Buttons(panelButtons(p)).Text(ctx, p.Panel())
	return err
}

// settingsPress answers a panel button: a toast naming the new value, then
// the panel redrawn in place.
func (b *Bot) settingsPress(ctx context.Context, cb Callback) error {
	if !b.isAdmin(cb.From) {
		return b.tg.Callback(cb.QueryID).Answer(ctx, texts.OnlyAdmins)
	}
	c, ok := settings.ParseData(cb.Data)
	if !ok {
		return b.tg.Callback(cb.QueryID).Answer(ctx, texts.SettingsOutOfDate)
	}
	p, err := b.settings.Get(ctx, cb.From)
	if err != nil {
		b.cfg.Log.Error(err, "Could not read settings", "user", cb.From)
	}
	p = p.Apply(c)
	if err := b.settings.Set(ctx, cb.From, p); err != nil {
		b.cfg.Log.Error(err, "Could not save a setting", "user", cb.From)
		return b.tg.Callback(cb.QueryID).Answer(ctx, texts.SettingsSaveFail)
	}
	if err := b.tg.Callback(cb.QueryID).Answer(ctx, c.Toast()); err != nil {
		return err
	}
	return b.tg.To(cb.Chat).Buttons(panelButtons(p)).Edit(cb.MsgID).Text(ctx, p.Panel())
}

// prefs reads user's settings, the defaults when they cannot be read.
func (b *Bot) prefs(ctx context.Context, user int64) settings.Prefs {
	p, err := b.settings.Get(ctx, user)
	if err != nil {
		b.cfg.Log.Error(err, "Could not read settings; using the defaults", "user", user)
		return settings.Defaults
	}
	return p
}
