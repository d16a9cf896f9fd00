package cli

import (
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
)

// stderrOf returns what f writes to the process's standard error.
func stderrOf(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stderr
	os.Stderr = w
	f()
	os.Stderr = saved
	w.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestClientLogsQuietByDefault: an error client-go only logs (as a stream
// cut by the command's own cancel does) does not reach the terminal at the
// default level, so a refused create prints its one error line alone.
func TestClientLogsQuietByDefault(t *testing.T) {
	got := stderrOf(t, func() {
		if err := clientLogs(0, os.Stderr); err != nil {
			t.Fatal(err)
		}
		utilruntime.HandleError(errors.New("Copying stderr failed"))
	})
	if strings.Contains(got, "Copying stderr failed") {
		t.Errorf("client-go's own log line reached stderr at -v 0: %q", got)
	}
}
