package faketg

import (
	"regexp"
	"unicode/utf16"

	"github.com/gotd/td/tg"
)

// Telegram marks bot commands and mentions in a user's text itself.
var (
	commandRe = regexp.MustCompile(`(?:^|[\s(])(/[A-Za-z0-9_]{1,32}(?:@[A-Za-z0-9_]{3,32})?)`)
	mentionRe = regexp.MustCompile(`(?:^|[\s(])(@[A-Za-z][A-Za-z0-9_]{3,31})`)
)

// autoEntities returns the bot_command and mention entities Telegram adds
// to a user's text, with UTF-16 offsets.
func autoEntities(text string) []tg.MessageEntityClass {
	var out []tg.MessageEntityClass
	units := func(byteOff int) int { return len(utf16.Encode([]rune(text[:byteOff]))) }
	for _, m := range commandRe.FindAllStringSubmatchIndex(text, -1) {
		off, end := units(m[2]), units(m[3])
		out = append(out, &tg.MessageEntityBotCommand{Offset: off, Length: end - off})
	}
	for _, m := range mentionRe.FindAllStringSubmatchIndex(text, -1) {
		off, end := units(m[2]), units(m[3])
		out = append(out, &tg.MessageEntityMention{Offset: off, Length: end - off})
	}
	return out
}
