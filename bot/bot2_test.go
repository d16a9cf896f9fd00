package bot_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gotd/td/tg"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/bot"
	"shelljob.dev/shelljob/bot/preview"
	"shelljob.dev/shelljob/bot/settings"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/faketg"
	"shelljob.dev/shelljob/internal/identity"
	"shelljob.dev/shelljob/internal/shelljob"
	"shelljob.dev/shelljob/internal/texts"
)

// preview waits for the edited preview that replies to msg.
func (e *env) preview(since int, chat *faketg.Chat, msg int) faketg.Event {
	e.t.Helper()
	return e.wait(since, "the preview", func(ev faketg.Event) bool {
		return ev.Kind == faketg.Send && ev.Chat == chat && ev.ReplyTo == msg && strings.HasSuffix(ev.Text, "▌") && ev.OK()
	})
}

// final waits for the final of command msg: its reply, or the edit of its
// preview when the command ran long enough to get one.
func (e *env) final(since int, chat *faketg.Chat, msg int) faketg.Event {
	e.t.Helper()
	ev := e.wait(since, "the reply", sendTo(chat, msg))
	if strings.HasSuffix(ev.Text, "▌") {
		return e.finalEdit(ev.Seq, ev.MsgID)
	}
	return ev
}

// finalFile waits for the .txt file of command msg's final: a reply to
// the command when the final came at once, or to its preview when the
// output came slowly enough for one to open first.
func (e *env) finalFile(since int, chat *faketg.Chat, msg int) faketg.Event {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	var file faketg.Event
	_, err := e.srv.WaitFor(ctx, func(l faketg.Log) bool {
		l = l.After(since).In(chat).OK()
		under := map[int]bool{msg: true}
		for _, ev := range l.Of(faketg.Send) {
			if ev.ReplyTo == msg {
				under[ev.MsgID] = true
			}
		}
		var ok bool
		file, ok = l.Of(faketg.Upload).Find(func(ev faketg.Event) bool { return under[ev.ReplyTo] })
		return ok
	})
	if err != nil {
		e.t.Fatalf("waiting for the final's file: %v", err)
	}
	return file
}

func (e *env) finalEdit(since int, id int) faketg.Event {
	e.t.Helper()
	return e.wait(since, "the final edit", func(ev faketg.Event) bool {
		return ev.Kind == faketg.Edit && ev.MsgID == id && !strings.HasSuffix(ev.Text, "▌") && ev.OK()
	})
}

func TestStopButton(t *testing.T) {
	e := newEnv(t, envOptions{})
	since := e.srv.Seq()
	m := e.send(e.admin, e.group, ".a echo tick; sleep 30")
	pv := e.preview(since, e.group, m.ID)

	ans, err := e.other.Press(e.ctx, e.group, pv.MsgID, []byte("shk:1"))
	if err != nil || ans.Text != "Only the bot's admins can do that." {
		t.Errorf("non-admin press = %q %v", ans.Text, err)
	}
	for data, want := range map[string]string{
		"shk:x1":  "That button is out of date.",
		"shk:":    "That button is out of date.",
		"zzz":     "That button is out of date.",
		"shk:99":  "#99 has already ended.",
		"shs:x:y": "That button is out of date; send /settings for a new panel.",
	} {
		ans, err := e.admin.Press(e.ctx, e.group, pv.MsgID, []byte(data))
		if err != nil || ans.Text != want {
			t.Errorf("press %q = %q %v, want %q", data, ans.Text, err, want)
		}
	}
	// The button of another message (not the preview) stops nothing.
	if ans, _ := e.admin.Press(e.ctx, e.group, m.ID, []byte("shk:1")); ans.Text != "#1 has already ended." {
		t.Errorf("press on the command = %q", ans.Text)
	}
	ans, err = e.admin.Press(e.ctx, e.group, pv.MsgID, []byte("shk:1"))
	if err != nil || ans.Text != "⏹ Stopping #1…" {
		t.Errorf("press = %q %v", ans.Text, err)
	}
	ans, _ = e.admin.Press(e.ctx, e.group, pv.MsgID, []byte("shk:1"))
	if ans.Text != "#1 is already stopping." && ans.Text != "#1 has already ended." {
		t.Errorf("second press = %q", ans.Text)
	}
	fin := e.finalEdit(pv.Seq, pv.MsgID)
	if fin.Text != "tick\n\n⏹ Stopped (exit 130)." || fin.HasMarkup {
		t.Errorf("final = %q markup %v", fin.Text, fin.HasMarkup)
	}
}

func TestDraftStop(t *testing.T) {
	e := newEnv(t, envOptions{})
	chat := e.admin.Private()
	since := e.srv.Seq()
	m := e.send(e.admin, chat, ".a echo go; sleep 30")
	d := e.wait(since, "the draft", func(ev faketg.Event) bool { return ev.Kind == faketg.Draft && ev.OK() })
	// A spoofed draft id stops nothing.
	if err := e.admin.StopDraft(e.ctx, faketg.DraftInfo{RandomID: 12345}); err != nil {
		t.Fatal(err)
	}
	if err := e.admin.StopDraft(e.ctx, *d.Draft); err != nil {
		t.Fatal(err)
	}
	fin := e.wait(d.Seq, "the final", sendTo(chat, m.ID))
	if fin.Text != "go\n\n⏹ Stopped (exit 130)." {
		t.Errorf("final = %q", fin.Text)
	}
}

func TestDraftRefusedFallsBackToEdits(t *testing.T) {
	e := newEnv(t, envOptions{})
	chat := e.admin.Private()
	chat.AllowDrafts(false)
	since := e.srv.Seq()
	m := e.send(e.admin, chat, ".a echo x; sleep 2.5")
	pv := e.preview(since, chat, m.ID)
	if len(pv.Buttons) != 1 {
		t.Errorf("fallback preview has no Stop button")
	}
	if fin := e.finalEdit(pv.Seq, pv.MsgID); fin.Text != "x" {
		t.Errorf("final = %q", fin.Text)
	}
}

func TestLongOutputFile(t *testing.T) {
	e := newEnv(t, envOptions{})
	since := e.srv.Seq()
	// Quick: no preview, the .txt file alone.
	m := e.send(e.admin, e.group, ".a seq 1 2000")
	up := e.finalFile(since, e.group, m.ID)
	if up.Media == nil || up.Media.Filename != "output.txt" || !strings.HasSuffix(string(up.Media.Data), "1999\n2000") {
		t.Errorf("file = %+v", up.Media)
	}
	// With a preview: it becomes the end under the scissors line.
	m = e.send(e.admin, e.group, ".a sleep 2.5; seq 1 2000")
	pv := e.preview(since, e.group, m.ID)
	fin := e.finalEdit(pv.Seq, pv.MsgID)
	if !strings.HasPrefix(fin.Text, "✂️ The full output is in the file below.\n\n") || !strings.HasSuffix(fin.Text, "2000") {
		t.Errorf("final = %.80q…", fin.Text)
	}
	e.wait(fin.Seq, "the file under it", func(ev faketg.Event) bool { return ev.Kind == faketg.Upload && ev.ReplyTo == pv.MsgID && ev.OK() })
}

func TestNewReplyModeAndDeleteFailure(t *testing.T) {
	e := newEnv(t, envOptions{})
	_ = e.store.Set(e.ctx, e.admin.ID, settings.Defaults.Apply(settings.Change{Setting: settings.Final, Value: "reply"}))
	since := e.srv.Seq()
	m := e.send(e.admin, e.group, ".a sleep 2.5; echo done")
	pv := e.preview(since, e.group, m.ID)
	fin := e.wait(pv.Seq, "the new reply", func(ev faketg.Event) bool {
		return ev.Kind == faketg.Send && ev.ReplyTo == m.ID && ev.Text == "done"
	})
	e.wait(fin.Seq, "the delete", func(ev faketg.Event) bool {
		return ev.Kind == faketg.Delete && len(ev.MsgIDs) == 1 && ev.MsgIDs[0] == pv.MsgID
	})
	// A preview that cannot be deleted says where the output went.
	e.srv.FailNext(tg.ChannelsDeleteMessagesRequestTypeID, 1, faketg.RPCError("MESSAGE_DELETE_FORBIDDEN"))
	since = e.srv.Seq()
	m = e.send(e.admin, e.group, ".a sleep 2.5; echo again")
	pv = e.preview(since, e.group, m.ID)
	if ev := e.finalEdit(pv.Seq, pv.MsgID); ev.Text != "Finished; output below." || ev.HasMarkup {
		t.Errorf("undeletable preview = %q", ev.Text)
	}
}

func TestEditFailureSendsAnew(t *testing.T) {
	e := newEnv(t, envOptions{})
	since := e.srv.Seq()
	m := e.send(e.admin, e.group, ".a sleep 2.5; echo out")
	pv := e.preview(since, e.group, m.ID)
	e.srv.FailNext(tg.MessagesEditMessageRequestTypeID, 5, faketg.RPCError("MESSAGE_ID_INVALID"))
	fin := e.wait(pv.Seq, "the final anew", sendTo(e.group, m.ID))
	if fin.Text != "out" {
		t.Errorf("final = %q", fin.Text)
	}
	e.wait(fin.Seq, "the preview removed", func(ev faketg.Event) bool { return ev.Kind == faketg.Delete })
}

func TestSettingsPanel(t *testing.T) {
	e := newEnv(t, envOptions{})
	chat := e.admin.Private()
	since := e.srv.Seq()
	m := e.send(e.admin, chat, "/settings")
	panel := e.wait(since, "the panel", sendTo(chat, m.ID))
	if !strings.Contains(panel.Text, "Telegram for Android disables the send button") || len(panel.Buttons) != 4 {
		t.Errorf("panel = %q, %d rows", panel.Text, len(panel.Buttons))
	}
	ans, err := e.admin.Press(e.ctx, chat, panel.MsgID, []byte("shs:groups:drafts"))
	if err != nil || ans.Text != "Groups: Drafts." {
		t.Errorf("toast = %q %v", ans.Text, err)
	}
	e.wait(ans.Event.Seq, "the redraw", func(ev faketg.Event) bool { return ev.Kind == faketg.Edit && ev.MsgID == panel.MsgID })
	if p, _ := e.store.Get(e.ctx, e.admin.ID); p.StreamGroups != settings.Drafts {
		t.Errorf("not saved: %+v", p)
	}
	if ans, _ := e.other.Press(e.ctx, chat, panel.MsgID, []byte("shs:render:off")); ans.Text != "Only the bot's admins can do that." {
		t.Errorf("non-admin toast = %q", ans.Text)
	}
	m = e.send(e.admin, chat, "/settings  RENDER\n off")
	if ev := e.wait(since, "text form", sendTo(chat, m.ID)); !strings.Contains(ev.Text, "Renderer: Off") {
		t.Errorf("after text form: %q", ev.Text)
	}
	m = e.send(e.admin, chat, "/settings render maybe")
	if ev := e.wait(since, "usage", sendTo(chat, m.ID)); !strings.HasPrefix(ev.Text, "Usage: /settings") {
		t.Errorf("usage = %q", ev.Text)
	}
	m = e.send(e.admin, e.group, "/settings@shelljob_bot")
	if ev := e.wait(since, "group pointer", sendTo(e.group, m.ID)); !strings.Contains(ev.Text, "private chat") {
		t.Errorf("group = %q", ev.Text)
	}
	e.store.SetFail(errors.New("lock timed out"))
	m = e.send(e.admin, chat, "/settings final reply")
	if ev := e.wait(since, "save failure", sendTo(chat, m.ID)); ev.Text != "Could not save that setting; try again." {
		t.Errorf("save failure = %q", ev.Text)
	}
	if ans, _ := e.admin.Press(e.ctx, chat, panel.MsgID, []byte("shs:final:reply")); ans.Text != "Could not save that setting; try again." {
		t.Errorf("save failure toast = %q", ans.Text)
	}
}

func TestGuestShell(t *testing.T) {
	e := newEnv(t, envOptions{})
	guest := e.srv.NewChat(faketg.Supergroup, faketg.ChatOptions{NoBot: true})
	q, err := e.other.Guest(e.ctx, guest, "@shelljob_bot .a echo hi")
	if err != nil {
		t.Fatal(err)
	}
	if m, err := q.Answer(e.ctx); err != nil || m.Text != "Not available here." {
		t.Errorf("non-admin guest = %q %v", m.Text, err)
	}
	since := e.srv.Seq()
	q, err = e.admin.Guest(e.ctx, guest, "@shelljob_bot .a echo one; sleep 2.5; echo two")
	if err != nil {
		t.Fatal(err)
	}
	if m, err := q.Answer(e.ctx); err != nil || m.Text != "⏳ Running…" {
		t.Errorf("guest answer = %q %v", m.Text, err)
	}
	pv := e.wait(since, "the guest preview", func(ev faketg.Event) bool {
		return ev.Kind == faketg.InlineEdit && strings.HasSuffix(ev.Text, "▌")
	})
	if !strings.HasPrefix(pv.Text, "⏳ #1 · @shelljob_bot .k to stop\n\none\n") {
		t.Errorf("guest preview = %q", pv.Text)
	}
	fin := e.wait(pv.Seq, "the guest final", func(ev faketg.Event) bool {
		return ev.Kind == faketg.InlineEdit && !strings.HasSuffix(ev.Text, "▌")
	})
	if fin.Text != "one\ntwo\n\nexit 0" {
		t.Errorf("guest final = %q", fin.Text)
	}
	// @bot .k stops the caller's own guest job.
	q, _ = e.admin.Guest(e.ctx, guest, "@shelljob_bot .a sleep 30")
	if _, err := q.Answer(e.ctx); err != nil {
		t.Fatal(err)
	}
	// Stop it once it runs: a stop that lands while the shell is still
	// starting its command can miss SIGINT and end at SIGTERM (143).
	e.wait(fin.Seq, "the second guest preview", func(ev faketg.Event) bool {
		return ev.Kind == faketg.InlineEdit && strings.HasPrefix(ev.Text, "⏳ #2")
	})
	k, _ := e.admin.Guest(e.ctx, guest, "@shelljob_bot .k")
	if m, _ := k.Answer(e.ctx); m.Text != "⏹ Stopping #2…" {
		t.Errorf("@bot .k = %q", m.Text)
	}
	k, _ = e.admin.Guest(e.ctx, guest, "@shelljob_bot .k 1 2")
	if m, _ := k.Answer(e.ctx); m.Text != "Usage: @shelljob_bot .k (alone or as a reply), @shelljob_bot .k N, @shelljob_bot .k all, @shelljob_bot .k ls" {
		t.Errorf("guest usage = %q", m.Text)
	}
	e.wait(since, "the stopped guest final", func(ev faketg.Event) bool {
		return ev.Kind == faketg.InlineEdit && strings.HasSuffix(ev.Text, "exit 130\n⏹ Stopped")
	})
}

func TestShutdownStopsJobs(t *testing.T) {
	e := newEnv(t, envOptions{})
	since := e.srv.Seq()
	m := e.send(e.admin, e.group, ".a echo up; sleep 30")
	pv := e.preview(since, e.group, m.ID)
	done := make(chan int)
	go func() { done <- e.bot.Shutdown() }()
	fin := e.finalEdit(pv.Seq, pv.MsgID)
	if fin.Text != "up\n\n⏹ Stopped: the bot is going offline (exit 130)." {
		t.Errorf("shutdown final = %q", fin.Text)
	}
	if left := <-done; left != 0 {
		t.Errorf("%d jobs left", left)
	}
	// A job arriving after the shutdown began is stopped before it runs.
	m = e.send(e.admin, e.group, ".a echo never")
	if ev := e.wait(pv.Seq, "the dropped final", sendTo(e.group, m.ID)); ev.Text != "⏹ Stopped before it ran: the bot is going offline." {
		t.Errorf("late job = %q", ev.Text)
	}
}

func TestBadInput(t *testing.T) {
	e := newEnv(t, envOptions{})
	since := e.srv.Seq()
	m := e.send(e.admin, e.group, ".a printf 'a\\000b\\377c\\n'")
	if ev := e.final(since, e.group, m.ID); ev.Text != `a\x00b\xffc` {
		t.Errorf("binary final = %q", ev.Text)
	}
	long := ".a echo " + strings.Repeat("x", 4088)
	m = e.send(e.admin, e.group, long)
	up := e.finalFile(since, e.group, m.ID)
	if up.Media == nil || string(up.Media.Data) != strings.Repeat("x", 4088) {
		t.Errorf("long command's file = %+v", up.Media)
	}
	m = e.send(e.admin, e.group, ".a echo a\x00b")
	if ev := e.wait(since, "NUL command", sendTo(e.group, m.ID)); ev.Text != "The command holds a NUL byte, which a shell cannot run." {
		t.Errorf("NUL command = %q", ev.Text)
	}
}

func TestFloodOfCommands(t *testing.T) {
	e := newEnv(t, envOptions{workers: 8})
	since := e.srv.Seq()
	var ids []int
	for i := range 50 {
		ids = append(ids, e.send(e.admin, e.group, fmt.Sprintf(".a echo job%d", i)).ID)
		time.Sleep(100 * time.Millisecond)
	}
	for i, id := range ids {
		ev := e.final(since, e.group, id)
		if ev.Text != fmt.Sprintf("job%d", i) {
			t.Errorf("final %d = %q", i, ev.Text)
		}
	}
}

func TestStreamingOff(t *testing.T) {
	e := newEnv(t, envOptions{streamingOff: true})
	since := e.srv.Seq()
	m := e.send(e.admin, e.group, ".a printf '10%%\\r50%%\\n'; sleep 2.5")
	fin := e.wait(since, "the one final", sendTo(e.group, m.ID))
	if fin.Text != "10%\r50%" {
		t.Errorf("final = %q (no renderer when off)", fin.Text)
	}
	if l := e.srv.Log().After(since).Of(faketg.Edit, faketg.Draft); len(l) != 0 {
		t.Errorf("previews with streaming off: %v", l)
	}
}

func TestRestartPool(t *testing.T) {
	e := newEnv(t, envOptions{})
	since := e.srv.Seq()
	e.send(e.admin, e.group, ".a sleep 30")
	e.send(e.admin, e.admin.Private(), ".a sleep 30")
	time.Sleep(500 * time.Millisecond)
	m := e.send(e.admin, e.group, "@shelljob_bot .x")
	ev := e.wait(since, ".x reply", sendTo(e.group, m.ID))
	want := "Restarted the shell pool.\n1 command is queued or running on an old pool; .k stops it.\n1 command in another chat is queued or running on an old pool; .k in that chat stops it."
	if ev.Text != want {
		t.Errorf(".x = %q", ev.Text)
	}
	e.bot.Shutdown()
}

func TestRestartResumesPreviewAndFinal(t *testing.T) {
	e := newEnv(t, envOptions{})
	since := e.srv.Seq()
	m := e.send(e.admin, e.group, ".a echo before; sleep 5; echo after")
	pv := e.preview(since, e.group, m.ID)
	e.annotated(jobOf(m), "shell.shelljob.dev/preview", `"msg":`)
	e.restart()
	fin := e.finalEdit(pv.Seq, pv.MsgID)
	if fin.Text != "before\nafter" {
		t.Errorf("final after a restart = %q", fin.Text)
	}
	e.annotated(jobOf(m), "shell.shelljob.dev/delivered", "")
	// Delivered jobs are not picked up again.
	since = e.srv.Seq()
	e.restart()
	time.Sleep(500 * time.Millisecond)
	if l := e.srv.Log().After(since).Of(faketg.Edit, faketg.Send); len(l) != 0 {
		t.Errorf("a delivered job was delivered again: %v", l)
	}
}

// jobOf is the name of the job of command message m.
func jobOf(m faketg.Message) string {
	return shelljob.TelegramName(shellv1alpha1.ShellJobOrigin{Chat: m.Chat.BotAPIID(), Message: int64(m.ID)}, m.Date)
}

// annotated waits until job name has annotation key containing substr.
func (e *env) annotated(name, key, substr string) {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if sj, err := e.cluster.Job(e.ctx, name); err == nil {
			if v, ok := sj.Annotations[key]; ok && strings.Contains(v, substr) {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.t.Fatalf("%s never got annotation %s containing %q", name, key, substr)
}

// keptFiles records the replied-to files the bot was handed.
type keptFiles struct {
	bot.Telegram
	mu    sync.Mutex
	files []bot.File
}

func (k *keptFiles) MessageFiles(ctx context.Context, chat bot.Chat, id int, limit int64) ([]bot.File, error) {
	fs, err := k.Telegram.MessageFiles(ctx, chat, id, limit)
	k.mu.Lock()
	k.files = append(k.files, fs...)
	k.mu.Unlock()
	return fs, err
}

// A replied-to file goes into the job's $SHELLJOB_OUT, streamed from the
// temporary file its download went to, which is closed once the worker
// has it; the files the command leaves there come back, pictures as photos.
func TestFilesInAndOut(t *testing.T) {
	kept := &keptFiles{}
	e := newEnv(t, envOptions{wrapTG: func(tg bot.Telegram) bot.Telegram { kept.Telegram = tg; return kept }})
	since := e.srv.Seq()
	doc, err := e.admin.In(e.group).Document("notes.txt", "text/plain", []byte("from the chat\n")).Text(e.ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	m, err := e.admin.In(e.group).Reply(doc.ID).Text(e.ctx, `.a cat "$SHELLJOB_OUT/notes.txt"; echo made > "$SHELLJOB_OUT/out.txt"; printf 'PNG' > "$SHELLJOB_OUT/pic.png"`)
	if err != nil {
		t.Fatal(err)
	}
	if ev := e.final(since, e.group, m.ID); ev.Text != "from the chat" {
		t.Errorf("final = %q", ev.Text)
	}
	doc1 := e.wait(since, "out.txt", func(ev faketg.Event) bool {
		return ev.Kind == faketg.Upload && ev.Media != nil && ev.Media.Filename == "out.txt"
	})
	if doc1.Media.Photo || string(doc1.Media.Data) != "made\n" || doc1.ReplyTo != m.ID {
		t.Errorf("out.txt = %+v", doc1.Media)
	}
	pic := e.wait(since, "pic.png", func(ev faketg.Event) bool { return ev.Kind == faketg.Upload && ev.Media != nil && ev.Media.Photo })
	if string(pic.Media.Data) != "PNG" {
		t.Errorf("photo = %+v", pic.Media)
	}
	kept.mu.Lock()
	files := kept.files
	kept.mu.Unlock()
	if len(files) != 1 || files[0].Reader == nil || files[0].Data != nil || files[0].Size != int64(len("from the chat\n")) {
		t.Fatalf("replied-to files handed to the bot: %+v, want notes.txt as a stream", files)
	}
	e.annotated(jobOf(m), shellv1alpha1.AnnotationDelivered, "")
	if _, err := files[0].Reader.(io.ReaderAt).ReadAt(make([]byte, 1), 0); !errors.Is(err, os.ErrClosed) {
		t.Errorf("after the job, reading its input file gave %v, want it closed", err)
	}
	for _, ev := range e.srv.Log().After(since).Of(faketg.Upload) {
		if ev.Media != nil && ev.Media.Filename == "notes.txt" {
			t.Errorf("the input file was sent back")
		}
	}
}

// A replied-to file over the limit is refused from the size its message
// gives: nothing is downloaded, and no job is created.
// A replied-to file whose download fails leaves the command unrun, and
// the chat is told; no job is made.
func TestRepliedFileDownloadFails(t *testing.T) {
	e := newEnv(t, envOptions{})
	since := e.srv.Seq()
	doc, err := e.admin.In(e.group).Document("notes.txt", "text/plain", []byte("from the chat\n")).Text(e.ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	e.srv.FailNext(tg.UploadGetFileRequestTypeID, 100, faketg.RPCError("FILE_REFERENCE_EXPIRED"))
	m, err := e.admin.In(e.group).Reply(doc.ID).Text(e.ctx, `.a cat "$SHELLJOB_OUT/notes.txt"`)
	if err != nil {
		t.Fatal(err)
	}
	ans := e.wait(since, "the answer", sendTo(e.group, m.ID))
	if !strings.HasPrefix(ans.Text, "📎 Could not download the replied-to file") || !strings.HasSuffix(ans.Text, "the command did not run. Send it again.") {
		t.Errorf("answer = %q", ans.Text)
	}
	if _, err := e.cluster.Job(e.ctx, jobOf(m)); err == nil {
		t.Error("a job was made for the command")
	}
}

func TestRepliedFileTooBig(t *testing.T) {
	submits := &submitLog{}
	e := newEnv(t, envOptions{
		files: bot.FileLimits{InFile: 1 << 10},
		wrap:  func(c bot.Cluster) bot.Cluster { submits.Cluster = c; return submits },
	})
	since := e.srv.Seq()
	doc, err := e.admin.In(e.group).Document("big.bin", "application/octet-stream", make([]byte, 4<<10)).Text(e.ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	m, err := e.admin.In(e.group).Reply(doc.ID).Text(e.ctx, ".a wc -c big.bin")
	if err != nil {
		t.Fatal(err)
	}
	ev := e.wait(since, "the refusal", sendTo(e.group, m.ID))
	if want := texts.InFileTooBig("big.bin", 4<<10, 1<<10); ev.Text != want {
		t.Errorf("answer = %q, want %q", ev.Text, want)
	}
	if calls := e.srv.Log().After(since).Method("upload.getFile"); len(calls) != 0 {
		t.Errorf("%d upload.getFile calls for a refused file", len(calls))
	}
	if got := submits.commands(); len(got) != 0 {
		t.Errorf("jobs submitted: %q", got)
	}
}

// The files of $SHELLJOB_OUT go out within the limits for one file and for
// a job's files, and a note names each file left out and why.
// streamedFiles records whether the bot handed each file it sent as a
// stream, never read whole into memory.
type streamedFiles struct {
	bot.Telegram
	mu       sync.Mutex
	buffered []string
}

func (s *streamedFiles) Send(ctx context.Context, r bot.SendRequest) (int, error) {
	if f := r.File; f != nil && (f.Reader == nil || f.Data != nil) {
		s.mu.Lock()
		s.buffered = append(s.buffered, f.Name)
		s.mu.Unlock()
	}
	return s.Telegram.Send(ctx, r)
}

func TestOutputFilesCapped(t *testing.T) {
	streamed := &streamedFiles{}
	e := newEnv(t, envOptions{
		files:  bot.FileLimits{OutFile: 1 << 10, OutJob: 3 << 10},
		wrapTG: func(tg bot.Telegram) bot.Telegram { streamed.Telegram = tg; return streamed },
	})
	since := e.srv.Seq()
	m := e.send(e.admin, e.group, `.a cd "$SHELLJOB_OUT"; head -c 100 /dev/zero > a.txt; head -c 2048 /dev/zero > big.bin; `+
		`for f in c d e; do head -c 1000 /dev/zero > $f.txt; done`)
	note := e.wait(since, "the note", func(ev faketg.Event) bool {
		return sendTo(e.group, m.ID)(ev) && strings.HasPrefix(ev.Text, "⚠ Not sent")
	})
	want := texts.FilesSkipped([]string{texts.OutFileTooBig("big.bin", 2048, 1<<10), texts.OutJobTooBig("e.txt", 1000, 3<<10)})
	if note.Text != want {
		t.Errorf("note = %q, want %q", note.Text, want)
	}
	var sent []string
	for _, ev := range e.srv.Log().After(since).Of(faketg.Upload) {
		if ev.Media != nil {
			sent = append(sent, ev.Media.Filename)
		}
	}
	if want := []string{"a.txt", "c.txt", "d.txt"}; !slices.Equal(sent, want) {
		t.Errorf("sent %q, want %q", sent, want)
	}
	streamed.mu.Lock()
	defer streamed.mu.Unlock()
	if len(streamed.buffered) != 0 {
		t.Errorf("files read whole into memory before their upload: %q", streamed.buffered)
	}
}

// crasher plays a bot that dies in the middle of a call to the cluster:
// the first call of the method named at hangs until the bot's context
// ends. The cluster, like the API server's client, refuses calls on an
// ended context.
type crasher struct {
	bot.Cluster
	at    string
	calls atomic.Int32 // of at
}

// hang hangs the first call of at.
func (c *crasher) hang(ctx context.Context, method string) error {
	if method == c.at && c.calls.Add(1) == 1 {
		<-ctx.Done()
	}
	return ctx.Err()
}

func (c *crasher) GetFiles(ctx context.Context, job string, w io.Writer) error {
	if err := c.hang(ctx, "GetFiles"); err != nil {
		return err
	}
	return c.Cluster.GetFiles(ctx, job, w)
}

func (c *crasher) FollowText(ctx context.Context, sj *shellv1alpha1.ShellJob, mode agentapi.TextMode, w io.Writer) error {
	if err := c.hang(ctx, "FollowText"); err != nil {
		return err
	}
	return c.Cluster.FollowText(ctx, sj, mode, w)
}

func (c *crasher) PutFiles(ctx context.Context, job string, r io.Reader) error {
	if err := c.hang(ctx, "PutFiles"); err != nil {
		return err
	}
	return c.Cluster.PutFiles(ctx, job, r)
}

func (c *crasher) As(id identity.Identity) bot.Person { return crasherPerson{c.Cluster.As(id), c} }

// crasherPerson is a crasher's admin.
type crasherPerson struct {
	bot.Person
	c *crasher
}

func (p crasherPerson) Release(ctx context.Context, name string) error {
	if err := p.c.hang(ctx, "Release"); err != nil {
		return err
	}
	return p.Person.Release(ctx, name)
}

func (c *crasher) Annotate(ctx context.Context, name, key, value string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return c.Cluster.Annotate(ctx, name, key, value)
}

// crashed waits until the crasher's call hangs.
func (c *crasher) crashed(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for c.calls.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s was never called", c.at)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A bot that died sending a job's files does not send them again after its
// restart: the final says they were not sent.
func TestOutputFilesAtMostOnce(t *testing.T) {
	crash := &crasher{at: "GetFiles"}
	e := newEnv(t, envOptions{wrap: func(c bot.Cluster) bot.Cluster { crash.Cluster = c; return crash }})
	since := e.srv.Seq()
	m := e.send(e.admin, e.group, `.a echo big > "$SHELLJOB_OUT/big.bin"`)
	e.wait(since, "the final", sendTo(e.group, m.ID))
	crash.crashed(t)
	e.restart()
	e.wait(since, "the note", func(ev faketg.Event) bool {
		return sendTo(e.group, m.ID)(ev) && ev.Text == texts.FilesNotDelivered
	})
	if n := crash.calls.Load(); n != 1 {
		t.Errorf("the files were asked for %d times", n)
	}
}

// A bot that died delivering a final (here, while it read a long output
// again) sends it in its small form after its restart: how the job ended,
// and the note, without reading the output again.
func TestFinalAtMostOnce(t *testing.T) {
	crash := &crasher{at: "FollowText"}
	e := newEnv(t, envOptions{wrap: func(c bot.Cluster) bot.Cluster { crash.Cluster = c; return crash }})
	since := e.srv.Seq()
	m := e.send(e.admin, e.group, `.a head -c 300000 /dev/zero | tr '\0' y; exit 3`)
	crash.crashed(t)
	e.restart()
	want := preview.Final("", 3, true, preview.NotStopped, texts.FinalNotSent)
	e.wait(since, "the small final", func(ev faketg.Event) bool {
		return (sendTo(e.group, m.ID)(ev) || ev.Kind == faketg.Edit) && ev.Text == want
	})
	if n := crash.calls.Load(); n != 1 {
		t.Errorf("the output was read again %d times", n)
	}
}

// refusedAttempt is a cluster whose API server refuses the bot the record
// of a final's attempt.
type refusedAttempt struct{ bot.Cluster }

func (c refusedAttempt) Annotate(ctx context.Context, name, key, value string) error {
	if key == shellv1alpha1.AnnotationFinalAttempted {
		return apierrors.NewForbidden(schema.GroupResource{Group: shellv1alpha1.GroupVersion.Group, Resource: "shelljobs"}, name, errors.New("refused"))
	}
	return c.Cluster.Annotate(ctx, name, key, value)
}

// A final whose attempt the cluster refuses to record goes out in its
// small form, and says why.
func TestFinalAttemptRefused(t *testing.T) {
	e := newEnv(t, envOptions{wrap: func(c bot.Cluster) bot.Cluster { return refusedAttempt{c} }})
	since := e.srv.Seq()
	m := e.send(e.admin, e.group, ".a echo hidden; exit 4")
	want := preview.Final("", 4, true, preview.NotStopped, texts.FinalNotRecorded)
	if ev := e.final(since, e.group, m.ID); ev.Text != want {
		t.Errorf("final %q, want %q", ev.Text, want)
	}
}

// A held job that a restarted bot finds is released when its files are in
// place (only the release was lost), and stopped before it runs, with a
// note, when they are not: they went with the old bot.
func TestHeldJobAtRestart(t *testing.T) {
	for at, want := range map[string]string{
		"Release":  "from the chat",
		"PutFiles": texts.StoppedBeforeRun + "\n\n" + texts.HeldAtRestart,
	} {
		t.Run(at, func(t *testing.T) {
			crash := &crasher{at: at}
			e := newEnv(t, envOptions{wrap: func(c bot.Cluster) bot.Cluster { crash.Cluster = c; return crash }})
			since := e.srv.Seq()
			doc, err := e.admin.In(e.group).Document("notes.txt", "text/plain", []byte("from the chat\n")).Text(e.ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.admin.In(e.group).Reply(doc.ID).Text(e.ctx, `.a cat "$SHELLJOB_OUT/notes.txt"`); err != nil {
				t.Fatal(err)
			}
			crash.crashed(t)
			e.restart()
			// A preview may come first, and the final be its edit.
			e.wait(since, "the final "+strconv.Quote(want), func(ev faketg.Event) bool { return ev.Text == want })
		})
	}
}

func TestAliasesAndHelp(t *testing.T) {
	e := newEnv(t, envOptions{tg: faketg.Options{Bot: faketg.BotOptions{
		Username: "shelljob_bot",
		Aliases:  []faketg.Alias{{Username: "sh_alias_bot", Active: true}, {Username: "old_alias_bot"}},
	}}})
	since := e.srv.Seq()
	m := e.send(e.admin, e.group, "@SH_ALIAS_BOT .a echo via alias")
	if ev := e.final(since, e.group, m.ID); ev.Text != "via alias" {
		t.Errorf("alias = %q", ev.Text)
	}
	e.send(e.admin, e.group, "@old_alias_bot .a echo inactive")
	e.send(e.admin, e.group, "@shelljob_bot, .a echo comma")
	m = e.send(e.admin, e.group, "/help@sh_alias_bot")
	help := e.wait(since, "help", sendTo(e.group, m.ID))
	if !strings.Contains(help.Text, "@shelljob_bot .a CMD") {
		t.Errorf("help = %q", help.Text)
	}
	time.Sleep(500 * time.Millisecond)
	for _, txt := range e.srv.Log().After(since).Of(faketg.Send).Texts() {
		if txt == "inactive" || txt == "comma" {
			t.Errorf("answered %q", txt)
		}
	}
}

func TestForwardedCommandIgnored(t *testing.T) {
	e := newEnv(t, envOptions{})
	since := e.srv.Seq()
	if _, err := e.admin.In(e.group).Forwarded(e.other).Text(e.ctx, ".a echo fwd"); err != nil {
		t.Fatal(err)
	}
	m := e.send(e.admin, e.group, ".a echo mine")
	e.wait(since, "own", sendTo(e.group, m.ID))
	if l := e.srv.Log().After(since).Of(faketg.Send).Texts(); len(l) != 1 {
		t.Errorf("answers = %q", l)
	}
}

// submitLog records the commands of the jobs submitted.
type submitLog struct {
	bot.Cluster
	mu   sync.Mutex
	cmds []string
}

func (s *submitLog) As(id identity.Identity) bot.Person { return submitLogPerson{s.Cluster.As(id), s} }

// submitLogPerson is a submitLog's admin.
type submitLogPerson struct {
	bot.Person
	s *submitLog
}

func (p submitLogPerson) Submit(ctx context.Context, name string, spec shellv1alpha1.ShellJobSpec, annotations map[string]string) (*shellv1alpha1.ShellJob, error) {
	p.s.mu.Lock()
	p.s.cmds = append(p.s.cmds, spec.Command)
	p.s.mu.Unlock()
	return p.Person.Submit(ctx, name, spec, annotations)
}

func (s *submitLog) commands() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.cmds)
}

// A guest answer the admin picked is posted in their name via the bot: its
// text may read as a command, and the bot must not run it (the reference's
// "echoed guest answer").
func TestEchoedGuestAnswerIgnored(t *testing.T) {
	submits := &submitLog{}
	e := newEnv(t, envOptions{wrap: func(c bot.Cluster) bot.Cluster { submits.Cluster = c; return submits }})
	since := e.srv.Seq()
	if _, err := e.admin.In(e.group).ViaBot().Text(e.ctx, ".a echo echoed"); err != nil {
		t.Fatal(err)
	}
	m := e.send(e.admin, e.group, ".a echo mine")
	e.wait(since, "own", sendTo(e.group, m.ID))
	if got := submits.commands(); !slices.Equal(got, []string{"echo mine"}) {
		t.Errorf("jobs submitted for %q, want only echo mine", got)
	}
}

func TestKillAsReply(t *testing.T) {
	e := newEnv(t, envOptions{})
	since := e.srv.Seq()
	other := e.send(e.admin, e.group, "just chatting")
	a := e.send(e.admin, e.group, ".a echo r; sleep 30")
	pv := e.preview(since, e.group, a.ID)
	k, _ := e.admin.In(e.group).Reply(other.ID).Text(e.ctx, ".k")
	if ev := e.wait(since, "no job", sendTo(e.group, k.ID)); ev.Text != "That message has no running command." {
		t.Errorf(".k on another message = %q", ev.Text)
	}
	k, _ = e.admin.In(e.group).Reply(pv.MsgID).Text(e.ctx, ".k")
	if ev := e.wait(since, "stop", sendTo(e.group, k.ID)); ev.Text != "⏹ Stopping #1…" {
		t.Errorf(".k on the preview = %q", ev.Text)
	}
	e.finalEdit(pv.Seq, pv.MsgID)
}

func TestQueuedJobHeaderAndStopBeforeRun(t *testing.T) {
	e := newEnv(t, envOptions{workers: 1})
	since := e.srv.Seq()
	busy := e.send(e.admin, e.group, ".a sleep 30")
	e.annotated(jobOf(busy), "shell.shelljob.dev/preview", "")
	queued := e.send(e.admin, e.group, ".a echo never")
	pv := e.preview(since, e.group, queued.ID)
	if !strings.HasPrefix(pv.Text, "⏳ #2 waiting for a free shell\n\n") {
		t.Errorf("queued preview = %q", pv.Text)
	}
	k := e.send(e.admin, e.group, ".k 2")
	if ev := e.wait(since, "stop", sendTo(e.group, k.ID)); ev.Text != "⏹ Stopping #2…" {
		t.Errorf(".k 2 = %q", ev.Text)
	}
	if fin := e.finalEdit(pv.Seq, pv.MsgID); fin.Text != "⏹ Stopped before it ran." {
		t.Errorf("dropped final = %q", fin.Text)
	}
	bp := e.preview(since, e.group, busy.ID)
	e.send(e.admin, e.group, ".k 1")
	e.finalEdit(bp.Seq, bp.MsgID)
}

// stopOrder records the jobs the bot stops, in order.
type stopOrder struct {
	bot.Cluster
	mu    sync.Mutex
	names []string
}

func (s *stopOrder) As(id identity.Identity) bot.Person { return stopOrderPerson{s.Cluster.As(id), s} }

// stopOrderPerson is a stopOrder's admin.
type stopOrderPerson struct {
	bot.Person
	s *stopOrder
}

func (p stopOrderPerson) Stop(ctx context.Context, name string) (shelljob.StopOutcome, *shellv1alpha1.ShellJob, error) {
	p.s.mu.Lock()
	p.s.names = append(p.s.names, name)
	p.s.mu.Unlock()
	return p.Person.Stop(ctx, name)
}

// TestStopAllStopsWaitingJobsFirst: .k all stops the waiting job before
// the running one, whose shell it would otherwise take and run in.
func TestStopAllStopsWaitingJobsFirst(t *testing.T) {
	order := &stopOrder{}
	e := newEnv(t, envOptions{workers: 1, wrap: func(c bot.Cluster) bot.Cluster { order.Cluster = c; return order }})
	since := e.srv.Seq()
	busy := e.send(e.admin, e.group, ".a sleep 30")
	e.annotated(jobOf(busy), "shell.shelljob.dev/preview", "")
	queued := e.send(e.admin, e.group, ".a echo never")
	pv := e.preview(since, e.group, queued.ID)
	k := e.send(e.admin, e.group, ".k all")
	if ev := e.wait(since, ".k all", sendTo(e.group, k.ID)); ev.Text != "⏹ Stopping #1…\n⏹ Stopping #2…" {
		t.Errorf(".k all = %q", ev.Text)
	}
	if fin := e.finalEdit(pv.Seq, pv.MsgID); fin.Text != "⏹ Stopped before it ran." {
		t.Errorf("the waiting job's final = %q", fin.Text)
	}
	order.mu.Lock()
	defer order.mu.Unlock()
	if want := []string{jobOf(queued), jobOf(busy)}; !slices.Equal(order.names, want) {
		t.Errorf("stopped %v, want %v", order.names, want)
	}
}

func TestForumTopic(t *testing.T) {
	e := newEnv(t, envOptions{})
	forum := e.srv.NewForum("dev")
	topic, err := forum.NewTopic(e.ctx, "builds")
	if err != nil {
		t.Fatal(err)
	}
	since := e.srv.Seq()
	m, err := e.admin.In(forum).Topic(topic.ID).Text(e.ctx, ".a echo in topic; sleep 2.5")
	if err != nil {
		t.Fatal(err)
	}
	pv := e.preview(since, forum, m.ID)
	if pv.TopMsgID != topic.ID {
		t.Errorf("preview topic = %d, want %d", pv.TopMsgID, topic.ID)
	}
	if fin := e.finalEdit(pv.Seq, pv.MsgID); fin.Text != "in topic" {
		t.Errorf("final = %q", fin.Text)
	}
	// In a topic, a .k that is no real reply is a bare .k.
	k, _ := e.admin.In(forum).Topic(topic.ID).Text(e.ctx, ".k")
	if ev := e.wait(since, ".k", sendTo(forum, k.ID)); ev.Text != "No running command here." {
		t.Errorf(".k in topic = %q", ev.Text)
	}
}
