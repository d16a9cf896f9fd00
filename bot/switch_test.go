package bot

import "testing"

func TestParseSwitch(t *testing.T) {
	on := []string{"", "1", "true", " YES ", "On", "\ttrue\n"}
	off := []string{"0", "false", "No", " OFF "}
	for _, v := range on {
		if got, err := ParseSwitch(StreamingEnv, v); !got || err != nil {
			t.Errorf("%q = %v %v, want on", v, got, err)
		}
	}
	for _, v := range off {
		if got, err := ParseSwitch(StreamingEnv, v); got || err != nil {
			t.Errorf("%q = %v %v, want off", v, got, err)
		}
	}
	for _, v := range []string{"2", "enabled", "o n", "nope"} {
		if _, err := ParseSwitch(StreamingEnv, v); err == nil {
			t.Errorf("%q accepted", v)
		}
	}
}
