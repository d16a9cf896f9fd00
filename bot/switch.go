package bot

import (
	"fmt"
	"strings"
)

// StreamingEnv is the kill switch of live output.
const StreamingEnv = "SHELLJOB_STREAMING"

// ParseSwitch reads an on/off switch such as SHELLJOB_STREAMING: unset,
// empty, "1", "true", "yes" or "on" is on; "0", "false", "no" or "off" is
// off; in any letter case, with blanks around them. Any other value is an
// error rather than a guess.
func ParseSwitch(name, value string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(value)) {
	case "", "1", "true", "yes", "on":
		return true, nil
	case "0", "false", "no", "off":
		return false, nil
	default:
		return false, fmt.Errorf("%s=%q: want one of 1, true, yes, on (or empty) for on, 0, false, no, off for off", name, value)
	}
}
