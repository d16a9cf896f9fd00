package faketg_test

import (
	"context"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gotd/td/telegram/dcs"

	"shelljob.dev/shelljob/internal/faketg"
	"shelljob.dev/shelljob/internal/faketg/echobot"
)

// A DC address may be a host name, as a Service's DNS name in a cluster:
// gotd dials the bot's own DC list at first and the list of help.getConfig
// (the advertised address) after a reconnect, both through net.Dialer.
func TestAdvertiseHostName(t *testing.T) {
	s := faketg.NewTest(t, faketg.Options{Advertise: "localhost:0"})
	_, port, _ := net.SplitHostPort(s.ListenAddr())
	if want := "localhost:" + port; s.Addr() != want {
		t.Fatalf("Addr() = %q, want %q", s.Addr(), want)
	}
	if got := s.DCList().Options[0]; got.IPAddress != "localhost" || got.Ipv6 {
		t.Fatalf("advertised DC option %+v", got)
	}
	alice := s.NewUser(faketg.UserOptions{Username: "alice"})

	var (
		mu     sync.Mutex
		dialed []string
	)
	resolver := dcs.Plain(dcs.PlainOptions{Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		dialed = append(dialed, addr)
		mu.Unlock()
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		// The bot starts from the listener's IP, as from -dc-addr.
		done <- echobot.Run(bctx, echobot.Config{Addr: s.ListenAddr(), PublicKeyPEM: s.PublicKeyPEM(), Token: s.BotToken(), Resolver: resolver})
	}()
	defer func() {
		stop()
		<-done
	}()
	if err := s.WaitConnected(ctx); err != nil {
		t.Fatal(err)
	}
	echo := func(text string) {
		t.Helper()
		seq := s.Seq()
		if _, err := alice.Send(ctx, alice.Private(), text); err != nil {
			t.Fatal(err)
		}
		if _, err := s.WaitEvent(ctx, seq, func(e faketg.Event) bool { return e.Kind == faketg.Edit && e.Text == "echo: "+text }); err != nil {
			t.Fatal(err)
		}
	}
	echo("before")
	seq := s.Seq()
	s.DisconnectBot()
	if _, err := s.WaitEvent(ctx, seq, func(e faketg.Event) bool { return e.Method == "users.getUsers" }); err != nil {
		t.Fatal(err)
	}
	echo("after")

	mu.Lock()
	defer mu.Unlock()
	t.Logf("the bot dialed %v", dialed)
	if len(dialed) < 2 || dialed[0] != s.ListenAddr() || !slices.Contains(dialed[1:], s.Addr()) {
		t.Fatalf("the bot dialed %v; want %s first, then the advertised %s", dialed, s.ListenAddr(), s.Addr())
	}
	if i := slices.IndexFunc(dialed[1:], func(a string) bool { return !strings.HasPrefix(a, "localhost:") }); i >= 0 {
		t.Fatalf("after the first connection the bot dialed %s, not the advertised address: %v", dialed[i+1], dialed)
	}
}
