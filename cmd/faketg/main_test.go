package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestScriptWithEchoBot(t *testing.T) {
	dir := t.TempDir()
	c := config{
		listen:      "127.0.0.1:0",
		token:       "1:T",
		admins:      "1000001,1000002",
		botUsername: "shelljob_bot",
		keyOut:      filepath.Join(dir, "key.pem"),
		keyFile:     filepath.Join(dir, "private.pem"),
		addrOut:     filepath.Join(dir, "addr"),
		filesDir:    filepath.Join(dir, "files"),
		exitOnEOF:   true,
		echoBot:     true,
	}
	script := strings.Join([]string{
		"/waitbot 3m", // the key exchange is slow under -race on a loaded machine
		"hello",
		"/wait ^echo: hello$ 20s",
		"/press 2 shk:1",
		"/group hi group",
		"/wait echo: hi group 20s",
		"/topic in a topic",
		"/wait echo: in a topic 20s",
		"file",
		"/wait the file 20s",
		"/guest @shelljob_bot .a ls",
		"/wait guest echo: @shelljob_bot 20s",
		"/stop",
		"/fail messages.editMessage 1 FLOOD_WAIT_3",
		"again",
		"/wait ⏳ echo: again 20s",
		"/sleep 300ms",
		"/msgs",
		"/bogus",
	}, "\n") + "\n"
	var out syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := run(ctx, c, strings.NewReader(script), &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	got := out.String()
	for _, want := range []string{
		"faketg: DC 2 at 127.0.0.1:",
		"you #1 in private:@admin1(1000001): hello",
		"bot draft 1 in private:@admin1(1000001): thinking about hello [⏹ Stop: /stop]",
		"bot #2 in private:@admin1(1000001) ↩1: ⏳ echo: hello [⏹ Stop → shk:1]",
		"bot #2 in private:@admin1(1000001) (edited): echo: hello",
		`🔔 toast for "shk:1": pressed shk:1`,
		`bot #4 in group:"ops"`,
		"echo: in a topic",
		"sent a file: document " + filepath.Join(c.filesDir, ""),
		"(edited): guest echo: @shelljob_bot .a ls",
		"⏹ pressed Stop on draft",
		"the next 1 calls of messages.editMessage fail with FLOOD_WAIT_3",
		"(edited) ✗ rpc error code 420: FLOOD_WAIT (3)",
		"bot set its command menu: /help",
		"! unknown command /bogus",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", got)
	}
	for _, f := range []string{c.keyOut, c.keyFile, c.addrOut} {
		if _, err := os.Stat(f); err != nil {
			t.Error(err)
		}
	}
	files, _ := filepath.Glob(filepath.Join(c.filesDir, "*-echo.txt"))
	if len(files) != 1 {
		t.Fatalf("saved files: %v", files)
	}
	if data, _ := os.ReadFile(files[0]); string(data) != "echo file\n" {
		t.Fatalf("saved file: %q", data)
	}
}
