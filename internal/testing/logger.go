package testing

import (
	"os"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
)

// Logger logs through t while the test runs, and drops what goroutines
// still log after it ended, as a manager's may. SHELLJOB_TEST_V sets the
// verbosity (default 0).
func Logger(t testing.TB) logr.Logger {
	var alive atomic.Bool
	alive.Store(true)
	t.Cleanup(func() { alive.Store(false) })
	v, _ := strconv.Atoi(os.Getenv("SHELLJOB_TEST_V"))
	return funcr.New(func(prefix, args string) {
		if alive.Load() {
			t.Log(prefix, args)
		}
	}, funcr.Options{Verbosity: v})
}
