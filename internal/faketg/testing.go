package faketg

import (
	"context"
	"testing"

	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
)

// NewTest starts a fake on a free loopback port for the test, with the
// test's logger, and closes it when the test ends. On failure it prints
// the bot's calls.
func NewTest(t testing.TB, opts Options) *Server {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = zaptest.NewLogger(t, zaptest.Level(zapcore.WarnLevel))
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("faketg: the bot's calls:\n%s", s.Log())
		}
		_ = s.Close()
	})
	return s
}
