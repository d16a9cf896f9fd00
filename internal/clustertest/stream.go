package clustertest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/cert"

	streamv1alpha1 "shelljob.dev/shelljob/api/stream/v1alpha1"
	"shelljob.dev/shelljob/internal/streamapi"
	"shelljob.dev/shelljob/internal/testenv"
)

// streamReadyTimeout bounds the wait for a stream API server to answer.
const streamReadyTimeout = time.Minute

// StreamFront stands for the Service of the stream API (the chart's
// APIService points at one): it sends each new connection to the server
// that Route named, once that server is ready, and closes it while there
// is none, or while it refuses. Envtest's API server aggregates nothing,
// so clients reach the stream API here, with their own credentials, as
// the API server would proxy them. Its serving certificate, for
// 127.0.0.1, is made for the test and is every server's behind it.
type StreamFront struct {
	t   testing.TB
	env *testenv.Env
	// CertDir holds the serving certificate and key, as
	// streamapi.Options.CertDir wants them; CAData is the PEM that trusts
	// them.
	CertDir string
	CAData  []byte

	addr    string
	backend atomic.Pointer[string]
	refuse  atomic.Bool
	conns   atomic.Int64

	mu   sync.Mutex
	open map[net.Conn]bool
}

// NewStreamFront listens until the end of the test, with no server behind
// it yet.
func NewStreamFront(t testing.TB, env *testenv.Env) *StreamFront {
	t.Helper()
	f := &StreamFront{t: t, env: env, CertDir: t.TempDir()}
	crt, key, err := cert.GenerateSelfSignedCertKey("127.0.0.1", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The certificate, then its CA.
	f.CAData = crt
	if err := os.WriteFile(filepath.Join(f.CertDir, streamapi.CertFile), crt, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.CertDir, streamapi.KeyFile), key, 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = ln.Addr().String()
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			f.conns.Add(1)
			go f.forward(conn)
		}
	}()
	return f
}

// forward copies conn to and from the server, or closes it when there is
// none.
func (f *StreamFront) forward(conn net.Conn) {
	defer conn.Close()
	f.mu.Lock()
	if f.open == nil {
		f.open = map[net.Conn]bool{}
	}
	f.open[conn] = true
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.open, conn)
		f.mu.Unlock()
	}()
	addr := f.backend.Load()
	if addr == nil || f.refuse.Load() {
		return
	}
	back, err := net.Dial("tcp", *addr)
	if err != nil {
		return
	}
	defer back.Close()
	done := make(chan struct{}, 2)
	copyTo := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go copyTo(back, conn)
	go copyTo(conn, back)
	<-done
}

// Route waits until the server at addr answers (its /readyz, and the
// group's discovery with the admin's client certificate, so that its
// client CA is loaded), then sends the new connections to it. It fails
// the test if ended closes first, or after a minute.
func (f *StreamFront) Route(addr string, ended <-chan struct{}) {
	f.t.Helper()
	cfg := f.Config(f.env.Config)
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	hc.Timeout = 5 * time.Second
	defer hc.CloseIdleConnections()
	var last string
	err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, streamReadyTimeout, true, func(context.Context) (bool, error) {
		select {
		case <-ended:
			return false, fmt.Errorf("the server ended")
		default:
		}
		for _, path := range []string{"/readyz", "/apis/" + streamv1alpha1.GroupVersion.String()} {
			resp, err := hc.Get("https://" + addr + path)
			if err != nil {
				last = err.Error()
				return false, nil
			}
			resp.Body.Close()
			if last = path + ": " + resp.Status; resp.StatusCode != http.StatusOK {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		f.t.Fatalf("the stream API on %s is not ready: %v; last: %s", addr, err, last)
	}
	f.backend.Store(&addr)
}

// Unroute closes the new connections from now on, as a Service with no
// ready endpoint does, until the next Route.
func (f *StreamFront) Unroute() { f.backend.Store(nil) }

// Refuse closes the new connections while on is true, as a network that
// drops them would; the server behind stays.
func (f *StreamFront) Refuse(on bool) { f.refuse.Store(on) }

// Cut closes the connections the front forwards, as a network that drops
// them: neither end says goodbye.
func (f *StreamFront) Cut() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for conn := range f.open {
		conn.Close()
	}
}

// Connections counts the connections the front has taken.
func (f *StreamFront) Connections() int64 { return f.conns.Load() }

// Config is user's config, which reaches the API server, made to reach
// the stream API through the front instead, trusting its certificate.
func (f *StreamFront) Config(user *rest.Config) *rest.Config {
	cfg := rest.CopyConfig(user)
	cfg.Host = "https://" + f.addr
	cfg.TLSClientConfig.CAData = f.CAData
	cfg.TLSClientConfig.CAFile = ""
	cfg.TLSClientConfig.Insecure = false
	return cfg
}

// String is the front's address.
func (f *StreamFront) String() string { return "the stream API's front on " + f.addr }
