// Package command parses the messages the bot answers: the shell commands
// .a, .af, .aa, .k, .x, .xf and .sbb, bare or after a mention of the bot,
// and /help and /settings, bare or as /cmd@bot. It is pure: no I/O.
package command

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Kind names a command.
type Kind int

const (
	// None is a message that is no command of the bot.
	None     Kind = iota
	A             // .a CMD: fork mode
	AF            // .af CMD: stateful mode
	AA            // .aa CMD: direct mode
	K             // .k [ARGS]
	X             // .x
	XF            // .xf
	SBB           // .sbb
	Help          // /help
	Settings      // /settings [ARGS]
)

// Command is one parsed command.
type Command struct {
	Kind Kind
	// Arg is the shell code of .a, .af and .aa, the text after .k, or the
	// words after /settings, with the blanks around it removed for .k and
	// /settings.
	Arg string
	// Mentioned tells whether the command came after a mention of the bot.
	Mentioned bool
}

// Names are the usernames the bot answers to: its primary username and its
// active aliases, without '@'. Matching ignores letter case.
type Names []string

// Has tells whether name is one of them.
func (n Names) Has(name string) bool {
	for _, x := range n {
		if strings.EqualFold(x, name) {
			return true
		}
	}
	return false
}

// Parse reads a chat message. A leading mention of one of names, followed
// by at least one blank, may precede a dot command; commas and colons are
// no separators. /help and /settings take /cmd@name for any of names.
func Parse(text string, names Names) Command {
	if rest, ok := afterMention(text, names); ok {
		c := parseDot(rest)
		c.Mentioned = c.Kind != None
		return c
	}
	if c := parseDot(text); c.Kind != None {
		return c
	}
	return parseSlash(text, names)
}

// ParseGuest reads the message of a guest chat query: only a mention of one
// of names, blanks, then .a CMD or .k [ARGS]. Anything else is None.
func ParseGuest(text string, names Names) Command {
	rest, ok := afterMention(text, names)
	if !ok {
		return Command{}
	}
	c := parseDot(rest)
	if c.Kind != A && c.Kind != K {
		return Command{}
	}
	c.Mentioned = true
	return c
}

// afterMention strips "@name<blanks>" from the start of text.
func afterMention(text string, names Names) (string, bool) {
	if !strings.HasPrefix(text, "@") {
		return "", false
	}
	end := 1
	for end < len(text) {
		r, size := utf8.DecodeRuneInString(text[end:])
		if !isNameRune(r) {
			break
		}
		end += size
	}
	name := text[1:end]
	if name == "" || !names.Has(name) {
		return "", false
	}
	rest := text[end:]
	trimmed := strings.TrimLeftFunc(rest, unicode.IsSpace)
	if len(trimmed) == len(rest) {
		return "", false
	}
	return trimmed, true
}

func isNameRune(r rune) bool {
	return r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
}

// parseDot reads a bare dot command.
func parseDot(text string) Command {
	switch {
	case strings.HasPrefix(text, ".aa"):
		if arg, ok := shellArg(text[3:]); ok {
			return Command{Kind: AA, Arg: arg}
		}
	case strings.HasPrefix(text, ".af"):
		if arg, ok := shellArg(text[3:]); ok {
			return Command{Kind: AF, Arg: arg}
		}
	}
	if strings.HasPrefix(text, ".a") {
		if arg, ok := shellArg(text[2:]); ok {
			return Command{Kind: A, Arg: arg}
		}
	}
	if strings.HasPrefix(text, ".k") {
		rest := text[2:]
		if rest == "" {
			return Command{Kind: K}
		}
		if r, _ := utf8.DecodeRuneInString(rest); unicode.IsSpace(r) {
			return Command{Kind: K, Arg: strings.TrimSpace(rest)}
		}
	}
	switch strings.TrimSpace(text) {
	case ".x":
		return Command{Kind: X}
	case ".xf":
		return Command{Kind: XF}
	case ".sbb":
		return Command{Kind: SBB}
	}
	return Command{}
}

// shellArg reads the blanks and shell code after .a, .af or .aa.
func shellArg(rest string) (string, bool) {
	r, _ := utf8.DecodeRuneInString(rest)
	if rest == "" || !unicode.IsSpace(r) {
		return "", false
	}
	arg := strings.TrimLeftFunc(rest, unicode.IsSpace)
	if strings.TrimSpace(arg) == "" {
		return "", false
	}
	return arg, true
}

// parseSlash reads /help and /settings, with an optional @name.
func parseSlash(text string, names Names) Command {
	if !strings.HasPrefix(text, "/") {
		return Command{}
	}
	word, rest := text, ""
	if i := strings.IndexFunc(text, unicode.IsSpace); i >= 0 {
		word, rest = text[:i], text[i:]
	}
	cmd, at, hasAt := strings.Cut(word[1:], "@")
	if hasAt && !names.Has(at) {
		return Command{}
	}
	switch strings.ToLower(cmd) {
	case "help":
		return Command{Kind: Help}
	case "settings":
		return Command{Kind: Settings, Arg: strings.TrimSpace(rest)}
	}
	return Command{}
}

// KillForm is what a .k asks for.
type KillForm int

const (
	// KillAlone: .k with no argument (or a reply).
	KillAlone KillForm = iota
	// KillNumber: .k N or .k #N.
	KillNumber
	// KillAll: .k all.
	KillAll
	// KillList: .k ls.
	KillList
	// KillUsage: anything else.
	KillUsage
)

// ParseKill reads the argument of .k.
func ParseKill(arg string) (KillForm, int64) {
	arg = strings.TrimSpace(arg)
	switch strings.ToLower(arg) {
	case "":
		return KillAlone, 0
	case "all":
		return KillAll, 0
	case "ls":
		return KillList, 0
	}
	digits := strings.TrimPrefix(arg, "#")
	if digits != "" && isASCIIDigits(digits) {
		if n, err := strconv.ParseInt(digits, 10, 64); err == nil && n > 0 {
			return KillNumber, n
		}
	}
	return KillUsage, 0
}

func isASCIIDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
