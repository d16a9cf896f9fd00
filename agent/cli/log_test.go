package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	crzap "sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// TestLoggerAsTheBots: the agent's log lines have the keys and levels of
// those of the bot and the operator (controller-runtime's zap.New), and
// -v shows the V-levels up to it.
func TestLoggerAsTheBots(t *testing.T) {
	write := func(log logr.Logger) {
		log.Info("Agent ready", "socket", "/spool/agent.sock")
		log.V(1).Info("Job started", "job", "j1", "pgid", 12)
		log.V(2).Info("Persistent shell output", "output", "hidden at -v 1")
		log.Error(errors.New("boom"), "Could not remove an old spool", "dir", "/spool/jobs/j0")
	}
	lines := func(b *bytes.Buffer) []map[string]any {
		t.Helper()
		var out []map[string]any
		for _, l := range bytes.Split(bytes.TrimSpace(b.Bytes()), []byte("\n")) {
			var m map[string]any
			if err := json.Unmarshal(l, &m); err != nil {
				t.Fatalf("not a JSON line: %q: %v", l, err)
			}
			out = append(out, m)
		}
		return out
	}
	var agentOut, botOut bytes.Buffer
	write(newLogger(&agentOut, 1))
	write(crzap.New(crzap.WriteTo(&botOut), crzap.Level(zapcore.Level(-1))))
	agent, bot := lines(&agentOut), lines(&botOut)
	if len(agent) != 3 || len(bot) != 3 {
		t.Fatalf("agent logged %d lines, the bot's logger %d; want 3 each:\n%s\n%s", len(agent), len(bot), &agentOut, &botOut)
	}
	for i := range agent {
		a, b := agent[i], bot[i]
		if !slices.Equal(slices.Sorted(maps.Keys(a)), slices.Sorted(maps.Keys(b))) {
			t.Errorf("line %d: keys %v, the bot's %v", i, slices.Sorted(maps.Keys(a)), slices.Sorted(maps.Keys(b)))
		}
		for _, k := range []string{"level", "msg", "error", "job", "socket"} {
			if a[k] != b[k] {
				t.Errorf("line %d: %s %v, the bot's %v", i, k, a[k], b[k])
			}
		}
		if ts, ok := a["ts"].(string); !ok {
			t.Errorf("line %d: ts %v, want a string", i, a["ts"])
		} else if _, err := time.Parse(time.RFC3339, ts); err != nil {
			t.Errorf("line %d: ts %q: %v", i, ts, err)
		}
	}
}
