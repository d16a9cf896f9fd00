package streamapi_test

import (
	"bufio"
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	streamv1alpha1 "shelljob.dev/shelljob/api/stream/v1alpha1"
	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/shelljob"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

// TestLogWho checks who reads which log through which resource: a job's
// owner through myshelljobs (a CLI job they created, a Telegram job the
// bot created as them, which names their Telegram user beside), a holder
// of get on shelljobs/log through shelljobs; nobody else, and nobody
// through myshelljobs a Telegram job that names no Telegram user beside
// its user (an older bot's, whose user is a Telegram id), even a
// Kubernetes user named as that id.
func TestLogWho(t *testing.T) {
	f := setup(t)
	f.job("mine", alice, "echo hi from alice")
	f.create(utiltesting.MakeShellJob("chat", f.cluster.Namespace).Command("echo hi from the chat").
		Origin(shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginTelegram, User: telegramID, Chat: 1, Message: 2}).Obj())
	f.create(utiltesting.MakeShellJob("chat-as-alice", f.cluster.Namespace).Command("echo hi as alice").
		Origin(shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginTelegram, User: alice, TelegramUser: 111, Chat: 1, Message: 3}).Obj())
	f.create(utiltesting.MakeShellJob("chat-no-sender", f.cluster.Namespace).Command("echo hi from no sender").
		Origin(shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginTelegram, User: alice, Chat: 1, Message: 4}).Obj())
	for _, j := range []string{"mine", "chat", "chat-as-alice", "chat-no-sender"} {
		f.finished(j)
	}

	cases := map[string]struct {
		who     caller
		job     string
		want    string
		wantErr func(error) bool
		// saying is in the refusal's message.
		saying string
	}{
		"the owner reads their job":                            {who: own(alice), job: "mine", want: "hi from alice\n"},
		"the owner of a Telegram job the bot made as them":     {who: own(alice), job: "chat-as-alice", want: "hi as alice\n"},
		"another user's job is refused":                        {who: own(bob), job: "mine", wantErr: apierrors.IsForbidden, saying: "shelljob mine is not bob's"},
		"another user's Telegram job is refused":               {who: own(bob), job: "chat-as-alice", wantErr: apierrors.IsForbidden, saying: "shelljob chat-as-alice is not bob's"},
		"an older bot's Telegram job has no owner":             {who: own(telegramID), job: "chat", wantErr: apierrors.IsForbidden, saying: "older bot's Telegram job"},
		"a Telegram job without its Telegram user is no one's": {who: own(alice), job: "chat-no-sender", wantErr: apierrors.IsForbidden, saying: "older bot's Telegram job"},
		"the owner may not read any job":                       {who: anyJob(alice), job: "mine", wantErr: apierrors.IsForbidden, saying: `cannot get resource "shelljobs/log"`},
		"a reader reads any job":                               {who: anyJob(reader), job: "mine", want: "hi from alice\n"},
		"a reader reads a Telegram job":                        {who: anyJob(reader), job: "chat", want: "hi from the chat\n"},
		"a reader owns nothing":                                {who: own(reader), job: "mine", wantErr: apierrors.IsForbidden, saying: `cannot get resource "myshelljobs/log"`},
		"a missing job is not found to a reader":               {who: anyJob(reader), job: "none", wantErr: apierrors.IsNotFound},
		"a missing job is not found to a user":                 {who: own(bob), job: "none", wantErr: apierrors.IsNotFound},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := f.log(f.as(tc.who), tc.job, streamv1alpha1.ShellJobLogOptions{})
			switch {
			case tc.wantErr != nil && (!tc.wantErr(err) || !strings.Contains(err.Error(), tc.saying)):
				t.Fatalf("log of %s as %s: got %q, %v; want the other error, saying %q", tc.job, tc.who, got, err, tc.saying)
			case tc.wantErr == nil && err != nil:
				t.Fatalf("log of %s as %s: %v", tc.job, tc.who, err)
			case got != tc.want:
				t.Errorf("log of %s as %s = %q, want %q", tc.job, tc.who, got, tc.want)
			}
			if err != nil {
				t.Logf("%s: %v", tc.who.user, err)
			}
		})
	}
}

// TestLogOwnerNeedsCreate checks that an owner who may no longer create
// ShellJobs reads nothing through myshelljobs, which RBAC still lets
// them ask.
func TestLogOwnerNeedsCreate(t *testing.T) {
	f := setup(t)
	f.grant("revoked", []string{"carol"}, rbacv1.PolicyRule{
		APIGroups: []string{streamv1alpha1.GroupName}, Resources: []string{"myshelljobs/log"}, Verbs: []string{"get"},
	})
	f.job("old", "carol", "echo hi")
	f.finished("old")
	_, err := f.log(f.as(own("carol")), "old", streamv1alpha1.ShellJobLogOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "may no longer create shelljobs") {
		t.Fatalf("log as an owner without create: %v, want Forbidden", err)
	}
	t.Log(err)
}

// TestLogOptions checks each option on a finished job.
func TestLogOptions(t *testing.T) {
	f := setup(t)
	f.job("words", alice, `echo hello world; printf 'caf\xc3\xa9 \xff\n'; printf 'abc\rX\n'`)
	f.finished("words")
	const whole = "hello world\ncafé \xff\nabc\rX\n"
	rc := f.as(own(alice))
	cases := map[string]struct {
		opts streamv1alpha1.ShellJobLogOptions
		want string
	}{
		"whole":          {want: whole},
		"from an offset": {opts: streamv1alpha1.ShellJobLogOptions{Offset: 6}, want: whole[6:]},
		"at the end":     {opts: streamv1alpha1.ShellJobLogOptions{Offset: int64(len(whole))}, want: ""},
		"followed":       {opts: streamv1alpha1.ShellJobLogOptions{Follow: true}, want: whole},
		"awaiting start": {opts: streamv1alpha1.ShellJobLogOptions{AwaitStart: true}, want: whole},
		"escaped text":   {opts: streamv1alpha1.ShellJobLogOptions{Text: streamv1alpha1.TextEscaped}, want: "hello world\ncafé \\xff\nabc\rX\n"},
		"rendered text":  {opts: streamv1alpha1.ShellJobLogOptions{Text: streamv1alpha1.TextRendered}, want: "hello world\ncafé \\xff\nXbc\n"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := f.log(rc, "words", tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("log = %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("framed", func(t *testing.T) {
		got, err := f.log(rc, "words", streamv1alpha1.ShellJobLogOptions{Framed: true, Offset: 6})
		if err != nil {
			t.Fatal(err)
		}
		var text strings.Builder
		reached, err := agentapi.ReadFollow(strings.NewReader(got), 6, &text)
		if err != nil {
			t.Fatalf("framed stream %q: %v", got, err)
		}
		if text.String() != whole[6:] || reached != int64(len(whole)) {
			t.Errorf("framed stream = %q to %d, want %q to %d", text.String(), reached, whole[6:], len(whole))
		}
	})
	t.Run("framed with the exit", func(t *testing.T) {
		for _, exit := range []bool{true, false} {
			got, err := f.log(rc, "words", streamv1alpha1.ShellJobLogOptions{Framed: true, Follow: true, Exit: exit})
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			w := agentapi.ExitWriter{Writer: &out}
			if _, err := agentapi.ReadFollow(strings.NewReader(got), 0, &w); err != nil || out.String() != whole {
				t.Fatalf("framed stream %q: %v", got, err)
			}
			switch e := w.Exited; {
			case !exit && e != nil:
				t.Errorf("an exit frame that was not asked for: %+v", e)
			case exit && (e == nil || e.ExitCode == nil || *e.ExitCode != 0 || e.Files == nil || e.Files.Count != 0):
				t.Errorf("exit %+v, want exit code 0 and no files", e)
			}
		}
	})
	t.Run("framed text", func(t *testing.T) {
		got, err := f.log(rc, "words", streamv1alpha1.ShellJobLogOptions{Framed: true, Text: streamv1alpha1.TextRendered})
		if err != nil {
			t.Fatal(err)
		}
		var text strings.Builder
		if err := agentapi.ReadText(strings.NewReader(got), agentapi.TextRendered, &text); err != nil {
			t.Fatalf("framed text %q: %v", got, err)
		}
		if want := "hello world\ncafé \\xff\nXbc\n"; text.String() != want {
			t.Errorf("framed text = %q, want %q", text.String(), want)
		}
	})
	bad := map[string]streamv1alpha1.ShellJobLogOptions{
		"a negative offset":       {Offset: -1},
		"an offset to await":      {AwaitStart: true, Offset: 3},
		"an unknown text":         {Text: "html"},
		"an offset into the text": {Text: streamv1alpha1.TextEscaped, Offset: 3},
		"an offset past the end":  {Offset: 1000},
		"the exit, not framed":    {Exit: true},
		"the exit of a text":      {Framed: true, Exit: true, Text: streamv1alpha1.TextEscaped},
	}
	for name, opts := range bad {
		t.Run(name, func(t *testing.T) {
			if got, err := f.log(rc, "words", opts); !apierrors.IsBadRequest(err) {
				t.Errorf("log with %s: %q, %v; want BadRequest", name, got, err)
			} else {
				t.Log(err)
			}
		})
	}
}

// TestLogLive checks that a follow streams the output as it comes, and
// that a running job's log is followed.
func TestLogLive(t *testing.T) {
	f := setup(t)
	f.job("live", alice, "echo first; sleep 300; echo never")
	f.waitJob("live", "started", shelljob.IsStarted)
	rc := f.as(own(alice))
	if got, err := f.log(rc, "live", streamv1alpha1.ShellJobLogOptions{}); !apierrors.IsBadRequest(err) {
		t.Fatalf("log of a running job without follow = %q, %v; want BadRequest", got, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	body, err := f.request(rc, "GET", "live", streamv1alpha1.SubresourceLog).
		VersionedParams(&streamv1alpha1.ShellJobLogOptions{Follow: true}, params).Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	br := bufio.NewReader(body)
	line, err := br.ReadString('\n')
	if err != nil || line != "first\n" {
		t.Fatalf("first line of the follow = %q, %v", line, err)
	}
	if sj, _ := f.cluster.Job(ctx, "live"); shelljob.IsFinished(sj) {
		t.Fatal("the job ended before its follow got its first line")
	}
	f.patch("live", `{"spec":{"stop":true}}`)
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatalf("the follow after the stop: %q, %v", rest, err)
	}
	if strings.Contains(string(rest), "never") {
		t.Errorf("the follow went on past the stop: %q", rest)
	}
	if !shelljob.IsFinished(f.finished("live")) {
		t.Error("the job did not end")
	}
}

// TestLogAwaitStart checks a follow opened before the job starts: right
// after its create, and while it is held.
func TestLogAwaitStart(t *testing.T) {
	f := setup(t)
	rc := f.as(own(alice))
	f.job("quick", alice, "echo quick")
	got, err := f.log(rc, "quick", streamv1alpha1.ShellJobLogOptions{AwaitStart: true, Framed: true})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	if _, err := agentapi.ReadFollow(strings.NewReader(got), 0, &text); err != nil || text.String() != "quick\n" {
		t.Fatalf("follow opened at the create = %q, %v; want quick", text.String(), err)
	}

	f.create(utiltesting.MakeShellJob("held", f.cluster.Namespace).Command("echo released").
		Origin(shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginCLI, User: alice}).Hold().Obj())
	done := make(chan struct{})
	var held string
	go func() {
		defer close(done)
		held, err = f.log(rc, "held", streamv1alpha1.ShellJobLogOptions{Follow: true})
	}()
	f.waitJob("held", "placed", shelljob.IsAssigned)
	select {
	case <-done:
		t.Fatalf("the follow of a held job ended: %q, %v", held, err)
	default:
	}
	f.patch("held", `{"spec":{"hold":false}}`)
	<-done
	if err != nil || held != "released\n" {
		t.Fatalf("follow of a held job once released = %q, %v", held, err)
	}

	f.create(utiltesting.MakeShellJob("queued", f.cluster.Namespace).Command("echo never").Pool("none").
		Origin(shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginCLI, User: alice}).Obj())
	if got, err := f.log(rc, "queued", streamv1alpha1.ShellJobLogOptions{}); !apierrors.IsBadRequest(err) {
		t.Errorf("log of a queued job without follow = %q, %v; want BadRequest", got, err)
	}
	f.patch("queued", `{"spec":{"stop":true}}`)
	f.finished("queued")
	got, err = f.log(rc, "queued", streamv1alpha1.ShellJobLogOptions{Follow: true, Framed: true})
	if err != nil {
		t.Fatal(err)
	}
	text.Reset()
	if _, err := agentapi.ReadFollow(strings.NewReader(got), 0, &text); err != nil || text.String() != "" {
		t.Errorf("follow of a job stopped before it ran = %q, %v; want an empty, closed output", text.String(), err)
	}
}

// TestLogWorkerGone checks that the log of a job whose worker is gone is a
// clear error.
func TestLogWorkerGone(t *testing.T) {
	f := setup(t)
	f.job("lost", alice, "echo gone soon")
	f.finished("lost")
	if err := f.cluster.LoseWorker(context.Background(), "lost"); err != nil {
		t.Fatal(err)
	}
	rc := f.as(own(alice))
	var err error
	// The replica's cache learns of the deletion.
	_ = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, testTimeout, true, func(context.Context) (bool, error) {
		_, err = f.log(rc, "lost", streamv1alpha1.ShellJobLogOptions{})
		return err != nil, nil
	})
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Code != http.StatusGone || !strings.Contains(err.Error(), "lost") {
		t.Fatalf("log of a job whose worker is gone: %v; want 410 Gone that says so", err)
	}
	t.Log(err)

	// The pool's new worker takes the lost one's name: a pod created
	// after the job started is not the job's worker.
	sj := f.finished("lost")
	pod := types.NamespacedName{Namespace: cmp.Or(sj.Status.PodNamespace, sj.Namespace), Name: sj.Status.Pod}
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, testTimeout, true, func(ctx context.Context) (bool, error) {
		return f.cluster.Client.Get(ctx, pod, &corev1.Pod{}) == nil, nil
	}); err != nil {
		t.Fatalf("no new worker took the name %s: %v", pod, err)
	}
	_ = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, testTimeout, true, func(context.Context) (bool, error) {
		_, err = f.log(rc, "lost", streamv1alpha1.ShellJobLogOptions{})
		return strings.Contains(fmt.Sprint(err), "replaced"), nil
	})
	if !errors.As(err, &status) || status.Status().Code != http.StatusGone || !strings.Contains(err.Error(), "was replaced") {
		t.Fatalf("log of a job whose worker was replaced: %v; want 410 Gone that says so", err)
	}
	t.Log(err)
}

// TestLogGzip: a reader that accepts gzip, as Go's HTTP client asks, gets
// the log gzipped, each piece readable as it comes; one that does not gets
// it as it is.
func TestLogGzip(t *testing.T) {
	f := setup(t)
	f.job("listing", alice, "seq 1 20000; echo first; sleep 300")
	f.waitJob("listing", "started", shelljob.IsStarted)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var want strings.Builder
	for i := 1; i <= 20000; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	want.WriteString("first\n")
	read := func(r io.Reader) string {
		t.Helper()
		got := make([]byte, want.Len())
		if _, err := io.ReadFull(r, got); err != nil {
			t.Fatalf("read %d bytes: %v", want.Len(), err)
		}
		return string(got)
	}

	zipped := f.rawLog(ctx, alice, "listing", "gzip")
	defer zipped.Body.Close()
	if enc := zipped.Header.Get("Content-Encoding"); enc != "gzip" {
		t.Fatalf("Content-Encoding %q for a reader that accepts gzip", enc)
	}
	var came bytes.Buffer
	zr, err := gzip.NewReader(io.TeeReader(zipped.Body, &came))
	if err != nil {
		t.Fatal(err)
	}
	if got := read(zr); got != want.String() {
		t.Fatal("the gzipped log is not the output")
	}
	if came.Len() > want.Len()/2 {
		t.Errorf("%d bytes of output came in %d, want less than half", want.Len(), came.Len())
	}

	plain := f.rawLog(ctx, alice, "listing", "identity")
	defer plain.Body.Close()
	if enc := plain.Header.Get("Content-Encoding"); enc != "" {
		t.Fatalf("Content-Encoding %q for a reader that does not accept gzip", enc)
	}
	if got := read(plain.Body); got != want.String() {
		t.Fatal("the plain log is not the output")
	}
}

// rawLog opens the follow of user's job as a plain HTTP request that asks
// for encoding, whose body Go's client leaves as it comes.
func (f *fixture) rawLog(ctx context.Context, user, job, encoding string) *http.Response {
	f.t.Helper()
	rc := f.as(own(user))
	u := f.request(rc, "GET", job, streamv1alpha1.SubresourceLog).
		VersionedParams(&streamv1alpha1.ShellJobLogOptions{Follow: true}, params).URL()
	hc, err := rest.HTTPClientFor(f.replica.Config(env.User(f.t, user)))
	if err != nil {
		f.t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("Accept-Encoding", encoding)
	resp, err := hc.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		f.t.Fatalf("log of %s: %s: %s", job, resp.Status, body)
	}
	return resp
}

// TestLogDeliver: a follow of the caller's own job that asks deliver
// marks the job delivered once it sent the output's end, when the exit
// counts no files; one that left files stays for its reader to mark, and
// nobody marks another's job through shelljobs.
func TestLogDeliver(t *testing.T) {
	f := setup(t)
	f.job("plain", alice, "echo plain")
	f.job("files", alice, `echo x > "$SHELLJOB_OUT/a.txt"; echo files`)
	f.finished("plain")
	f.finished("files")
	rc := f.as(own(alice))
	deliver := streamv1alpha1.ShellJobLogOptions{Framed: true, Follow: true, Exit: true, Deliver: true}
	for _, job := range []string{"plain", "files"} {
		got, err := f.log(rc, job, deliver)
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		w := agentapi.ExitWriter{Writer: &out}
		if _, err := agentapi.ReadFollow(strings.NewReader(got), 0, &w); err != nil || w.Exited == nil || out.String() != job+"\n" {
			t.Fatalf("%s: %q, exit %+v, %v", job, out.String(), w.Exited, err)
		}
	}
	f.waitJob("plain", "delivered", func(sj *shellv1alpha1.ShellJob) bool {
		at, ok := shelljob.Delivered(sj)
		return ok && !at.Before(sj.Status.CompletionTime.Add(-time.Second))
	})
	if sj := f.finished("files"); sj.Annotations[shellv1alpha1.AnnotationDelivered] != "" {
		t.Errorf("a job that left files was marked delivered: %v", sj.Annotations)
	}

	bad := map[string]struct {
		rc   streamClient
		opts streamv1alpha1.ShellJobLogOptions
	}{
		"through shelljobs": {rc: f.as(anyJob(reader)), opts: deliver},
		"without exit":      {rc: rc, opts: streamv1alpha1.ShellJobLogOptions{Framed: true, Follow: true, Deliver: true}},
	}
	for name, tc := range bad {
		if got, err := f.log(tc.rc, "files", tc.opts); !apierrors.IsBadRequest(err) {
			t.Errorf("deliver %s: %q, %v; want BadRequest", name, got, err)
		} else {
			t.Log(err)
		}
	}
	if sj := f.finished("files"); sj.Annotations[shellv1alpha1.AnnotationDelivered] != "" {
		t.Errorf("a refused deliver marked the job: %v", sj.Annotations)
	}
}
