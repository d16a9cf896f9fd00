package agent_test

import (
	"io"
	"net"
	"net/http"
	"os"
	"testing"

	"shelljob.dev/shelljob/agent"
	"shelljob.dev/shelljob/internal/agentapi"
)

// freeAddr is a loopback address with a port that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestReadyz: the readiness endpoint answers 200 while the job server
// answers, and fails once it does not, without an exec.
func TestReadyz(t *testing.T) {
	addr := freeAddr(t)
	d := startDaemon(t, "--ready-addr", addr)
	url := "http://" + addr + agentapi.ReadyPath
	hc := &http.Client{Timeout: waitShort}
	get := func() (int, string) {
		t.Helper()
		resp, err := hc.Get(url)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(); code != http.StatusOK {
		t.Fatalf("GET %s = %d %q, want 200", url, code, body)
	}
	// The job server still works behind it: a job runs.
	d.start("ready", "echo hi", false)
	if got := d.output("ready"); got != "hi\n" {
		t.Errorf("output %q", got)
	}
	if resp, err := hc.Post(url, "text/plain", nil); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST = %v, %v; want 405", resp, err)
	}

	// No job server to reach (its socket is gone): not ready.
	if err := os.Remove(agent.SocketPath(d.dir)); err != nil {
		t.Fatal(err)
	}
	if code, body := get(); code != http.StatusServiceUnavailable {
		t.Errorf("without the socket: %d %q, want 503", code, body)
	}

	// A stopped daemon answers nothing.
	d.stop()
	if code, body := get(); code != 0 {
		t.Errorf("after the stop: %d %q, want no answer", code, body)
	}
}
