package command

import "testing"

func TestParse(t *testing.T) {
	names := Names{"ShellBot", "alias_bot"}
	tests := map[string]struct {
		text string
		want Command
	}{
		"bare a":              {".a ls -la", Command{Kind: A, Arg: "ls -la"}},
		"a newline":           {".a\necho hi", Command{Kind: A, Arg: "echo hi"}},
		"af":                  {".af cd /tmp", Command{Kind: AF, Arg: "cd /tmp"}},
		"aa":                  {".aa  sleep 1", Command{Kind: AA, Arg: "sleep 1"}},
		"a without blank":     {".als", Command{}},
		"a alone":             {".a", Command{}},
		"a blanks only":       {".a   ", Command{}},
		"mention a":           {"@shellbot .a ls", Command{Kind: A, Arg: "ls", Mentioned: true}},
		"mention alias upper": {"@ALIAS_BOT\t.aa ls", Command{Kind: AA, Arg: "ls", Mentioned: true}},
		"mention comma":       {"@shellbot, .a ls", Command{}},
		"mention colon":       {"@shellbot: .a ls", Command{}},
		"mention no blank":    {"@shellbot.a ls", Command{}},
		"other bot":           {"@otherbot .a ls", Command{}},
		"mention k":           {"@shellbot .k", Command{Kind: K, Mentioned: true}},
		"mention x":           {"@shellbot .x", Command{Kind: X, Mentioned: true}},
		"mention xf":          {"@shellbot .xf", Command{Kind: XF, Mentioned: true}},
		"mention sbb":         {"@shellbot .sbb", Command{Kind: SBB, Mentioned: true}},
		"k alone":             {".k", Command{Kind: K}},
		"k args":              {".k 3 5", Command{Kind: K, Arg: "3 5"}},
		"k glued":             {".kill", Command{}},
		"x":                   {".x", Command{Kind: X}},
		"x trailing":          {".x  ", Command{Kind: X}},
		"xy":                  {".xy", Command{}},
		"help":                {"/help", Command{Kind: Help}},
		"help alias":          {"/help@Alias_Bot", Command{Kind: Help}},
		"help other bot":      {"/help@other", Command{}},
		"settings words":      {"/settings  Private\n DRAFTS", Command{Kind: Settings, Arg: "Private\n DRAFTS"}},
		"settings at":         {"/settings@shellbot render off", Command{Kind: Settings, Arg: "render off"}},
		"plain text":          {"hello", Command{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Parse(tc.text, names); got != tc.want {
				t.Errorf("Parse(%q) = %+v, want %+v", tc.text, got, tc.want)
			}
		})
	}
}

func TestParseGuest(t *testing.T) {
	names := Names{"shellbot"}
	tests := map[string]Command{
		"@shellbot .a ls":  {Kind: A, Arg: "ls", Mentioned: true},
		"@ShellBot .k 3":   {Kind: K, Arg: "3", Mentioned: true},
		"@shellbot .aa ls": {},
		"@shellbot .x":     {},
		".a ls":            {},
		"@shellbot, .k":    {},
	}
	for text, want := range tests {
		if got := ParseGuest(text, names); got != want {
			t.Errorf("ParseGuest(%q) = %+v, want %+v", text, got, want)
		}
	}
}

func TestParseKill(t *testing.T) {
	tests := map[string]struct {
		form KillForm
		n    int64
	}{
		"":     {KillAlone, 0},
		"3":    {KillNumber, 3},
		"#12":  {KillNumber, 12},
		"ALL":  {KillAll, 0},
		"ls":   {KillList, 0},
		"3 5":  {KillUsage, 0},
		"#":    {KillUsage, 0},
		"٣":    {KillUsage, 0},
		"0":    {KillUsage, 0},
		"-1":   {KillUsage, 0},
		"kill": {KillUsage, 0},
	}
	for arg, want := range tests {
		form, n := ParseKill(arg)
		if form != want.form || n != want.n {
			t.Errorf("ParseKill(%q) = %v %d, want %v %d", arg, form, n, want.form, want.n)
		}
	}
}
