package faketg

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"sync"
	"testing"

	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"

	"github.com/gotd/td/crypto"
)

// One key for every fake of a test binary: generating a 2048-bit key
// takes a while, more so under -race.
var (
	testKeyOnce sync.Once
	testKey     *rsa.PrivateKey
	testKeyErr  error
)

// NewTest starts a fake on a free loopback port for the test, with the
// test's logger (warnings and errors), and closes it when the test ends.
// On failure it prints the bot's calls. Fakes of one test binary share
// one RSA key unless opts.PrivateKey is set.
func NewTest(t testing.TB, opts Options) *Server {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = zaptest.NewLogger(t, zaptest.Level(zapcore.WarnLevel))
	}
	if opts.PrivateKey == nil {
		testKeyOnce.Do(func() {
			testKey, testKeyErr = rsa.GenerateKey(rand.Reader, crypto.RSAKeyBits)
		})
		if testKeyErr != nil {
			t.Fatal(testKeyErr)
		}
		opts.PrivateKey = testKey
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
