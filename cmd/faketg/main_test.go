package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gotd/td/crypto"

	"shelljob.dev/shelljob/internal/faketg/control"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

// script is a chat session with the echo bot, and lines its output must
// have; files is where the files the bot sent go.
func script(files string) (string, []string) {
	in := strings.Join([]string{
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
	return in, []string{
		"faketg: DC 2 at 127.0.0.1:",
		"you #1 in private:@admin1(1000001): hello",
		"bot draft 1 in private:@admin1(1000001): thinking about hello [⏹ Stop: /stop]",
		"bot #2 in private:@admin1(1000001) ↩1: ⏳ echo: hello [⏹ Stop → shk:1]",
		"bot #2 in private:@admin1(1000001) (edited): echo: hello",
		`🔔 toast for "shk:1": pressed shk:1`,
		`bot #4 in group:"ops"`,
		"echo: in a topic",
		"sent a file: document " + filepath.Join(files, ""),
		"(edited): guest echo: @shelljob_bot .a ls",
		"⏹ pressed Stop on draft",
		"the next 1 calls of messages.editMessage fail with FLOOD_WAIT_3",
		"(edited) ✗ rpc error code 420: FLOOD_WAIT (3)",
		"bot set its command menu: /help",
		"#2 bot (edited 1×): echo: hello",
		"! unknown command /bogus",
	}
}

func checkOutput(t *testing.T, got string, want []string, files string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("output lacks %q", w)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", got)
	}
	saved, _ := filepath.Glob(filepath.Join(files, "*-echo.txt"))
	if len(saved) != 1 {
		t.Fatalf("saved files: %v", saved)
	}
	if data, _ := os.ReadFile(saved[0]); string(data) != "echo file\n" {
		t.Fatalf("saved file: %q", data)
	}
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
		chat:        true,
		exitOnEOF:   true,
		echoBot:     true,
	}
	in, want := script(c.filesDir)
	var out utiltesting.SyncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := run(ctx, c, strings.NewReader(in), &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	checkOutput(t, out.String(), want, c.filesDir)
	for _, f := range []string{c.keyOut, c.keyFile, c.addrOut} {
		if _, err := os.Stat(f); err != nil {
			t.Error(err)
		}
	}
}

// The fake as a pod runs it: a key pair from keygen, a read-only private
// key, no terminal chat, the control API; and the terminal chat of
// -connect against it, which ends at the end of its input while the fake
// goes on.
func TestServerAndRemoteChat(t *testing.T) {
	dir := t.TempDir()
	priv, pub := filepath.Join(dir, "key.pem"), filepath.Join(dir, "pub.pem")
	if err := keygen([]string{"-key", priv, "-pub", pub}); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(priv, 0o400); err != nil {
		t.Fatal(err)
	}
	server := config{
		listen:      "127.0.0.1:0",
		advertise:   "localhost:0",
		token:       "1:T",
		admins:      "1000001,1000002",
		botUsername: "shelljob_bot",
		keyFile:     priv,
		keyOut:      filepath.Join(dir, "served.pub.pem"),
		control:     "127.0.0.1:0",
		echoBot:     true,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sctx, stop := context.WithCancel(ctx)
	var sout utiltesting.SyncBuffer
	done := make(chan error, 1)
	// No stdin: a pod has none.
	go func() { done <- run(sctx, server, nil, &sout) }()
	defer func() {
		stop()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("server: %v\n%s", err, sout.String())
		}
	}()
	url := ""
	for url == "" {
		if _, after, ok := strings.Cut(sout.String(), "faketg: control API on "); ok {
			url, _, _ = strings.Cut(after, "\n")
			break
		}
		select {
		case err := <-done:
			t.Fatalf("server: %v\n%s", err, sout.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	resp, err := http.Get(url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz: %s", resp.Status)
	}

	client := config{connect: url, filesDir: filepath.Join(dir, "files")}
	in, want := script(client.filesDir)
	want[0] = "faketg: DC 2 at localhost:"
	var out utiltesting.SyncBuffer
	if err := run(ctx, client, strings.NewReader(in), &out); err != nil {
		t.Fatalf("client: %v\n%s", err, out.String())
	}
	checkOutput(t, out.String(), want, client.filesDir)

	info, err := control.NewClient(url, nil).Info(ctx)
	if err != nil {
		t.Fatalf("the fake after the chat ended: %v", err)
	}
	if !info.Connected || info.Seq == 0 {
		t.Fatalf("info after the chat: %+v", info)
	}
	// The fake serves with the key keygen wrote.
	served, err := os.ReadFile(server.keyOut)
	if err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(pub); !bytes.Equal(served, data) {
		t.Fatalf("keygen wrote the public key\n%s\nthe fake serves\n%s", data, served)
	}
	if _, err := crypto.ParseRSAPublicKeys(served); err != nil {
		t.Fatal(err)
	}
}
