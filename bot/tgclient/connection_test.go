package tgclient_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"

	"shelljob.dev/shelljob/bot"
	"shelljob.dev/shelljob/bot/settings"
	"shelljob.dev/shelljob/bot/tgclient"
	"shelljob.dev/shelljob/internal/faketg"
)

// logLines keeps what a logger wrote, a line per call.
type logLines struct {
	t     *testing.T
	mu    sync.Mutex
	lines []string
}

func (l *logLines) add(prefix, args string) {
	l.t.Log(prefix, args)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, args)
}

// wait waits for a line that holds each of parts.
func (l *logLines) wait(ctx context.Context, parts ...string) {
	l.t.Helper()
	for {
		l.mu.Lock()
		for _, line := range l.lines {
			found := true
			for _, p := range parts {
				found = found && strings.Contains(line, p)
			}
			if found {
				l.mu.Unlock()
				return
			}
		}
		l.mu.Unlock()
		select {
		case <-ctx.Done():
			l.t.Fatalf("no log line with %q", parts)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestConnectionLogged: the client logs its connection, as which bot and
// to which DC, and a lost connection and the reconnection.
func TestConnectionLogged(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := faketg.NewTest(t, faketg.Options{})
	logs := &logLines{t: t}
	connected(t, srv, funcr.New(logs.add, funcr.Options{}))
	logs.wait(ctx, `"msg"="Connected to Telegram"`, `"bot"="`+srv.BotUsername()+`"`, `"dc"=2`, `"dcAddr"="`+srv.Addr()+`"`)

	srv.DisconnectBot()
	logs.wait(ctx, `"msg"="Lost the connection to Telegram; reconnecting"`)
	logs.wait(ctx, `"msg"="Reconnected to Telegram"`)
}

// TestFailedConnectionLogged: a client that cannot reach Telegram says so
// as it tries again.
func TestFailedConnectionLogged(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := faketg.NewTest(t, faketg.Options{})
	copts := srv.ClientOptions()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	logs := &logLines{t: t}
	b := bot.New(bot.Config{Admins: srv.Admins()}, nil, noJobs{}, &settings.MemoryStore{})
	c := tgclient.New(b, tgclient.Options{
		Token: srv.BotToken(), AppID: 17349, AppHash: "test",
		DC: copts.DC, DCList: copts.DCList, PublicKeys: copts.PublicKeys, Log: funcr.New(logs.add, funcr.Options{}),
	})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx, b) }()
	logs.wait(ctx, `"msg"="Could not connect to Telegram; trying again"`)
	stop()
	<-done
}
