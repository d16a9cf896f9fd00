//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"k8s.io/apimachinery/pkg/api/meta"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/faketg/control"
	"shelljob.dev/shelljob/internal/texts"
)

// The chat suite: the whole stack (hack/stack.sh), driven through the fake
// Telegram as the chat's admin would. The tests run one after another, in
// this order; the ones that restart or remove a component come last.

// ShellPoolSize is the chart's default shell pool.
const ShellPoolSize = 16

func TestChatShortCommands(t *testing.T) {
	p := Chats(t)
	for cmd, want := range map[string]string{
		".a true":   texts.ProcessExited(0),
		".a exit 3": texts.ProcessExited(3),
		".a echo hi from $(hostname | cut -c1-8)": "hi from " + "shell-",
	} {
		m := p.Group.Send(cmd)
		fin := p.Group.Final(m, FinalTimeout)
		if !strings.HasPrefix(fin.Text, want) {
			t.Errorf("%s: final %q, want %q", cmd, fin.Text, want)
		}
		if rs := p.Group.BotReplies(m.ID); len(rs) != 1 {
			t.Errorf("%s: %d replies, want the final alone: %s", cmd, len(rs), describe(rs, 5))
		}
	}
}

func TestChatNonAdminGetsSilence(t *testing.T) {
	p := Chats(t)
	m := p.MalloryGroup.Send(".a echo nope")
	// The admin's command after it is answered: the bot read both.
	after := p.Group.Send(".a echo yes")
	if fin := p.Group.Final(after, FinalTimeout); fin.Text != "yes" {
		t.Errorf("final %q", fin.Text)
	}
	time.Sleep(2 * time.Second)
	if rs := p.Group.BotReplies(m.ID); len(rs) != 0 {
		t.Errorf("a non-admin got answers: %s", describe(rs, 5))
	}
}

// TestChatGroupPreviewPace: a long command in a group gets a preview after
// 2 s, edited every 4 s and, after 30 s, every 10 s; the final replaces it.
// A \r progress bar shows as one line.
func TestChatGroupPreviewPace(t *testing.T) {
	p := Chats(t)
	since := p.Group.Seq()
	m := p.Group.Send(`.a for i in {1..40}; do printf '\rprogress %d%%' $((i * 100 / 40)); sleep 1; done; echo; echo done`)
	pv := p.Group.Preview(m, ReplyTimeout)
	if len(pv.Buttons) != 1 || pv.Buttons[0][0].Text != texts.StopButton {
		t.Errorf("preview buttons %+v", pv.Buttons)
	}
	fin := p.Group.Final(m, 2*time.Minute)
	if fin.Text != "progress 100%\ndone" {
		t.Errorf("final %q, want the bar's last frame and done", fin.Text)
	}
	var sent time.Time
	var edits []time.Time
	for _, e := range p.Group.EventsAfter(since) {
		switch {
		case e.Kind == "send" && e.ReplyTo == m.ID && e.OK():
			sent = e.Time
		case e.Kind == "edit" && e.MsgID == pv.ID && e.OK():
			edits = append(edits, e.Time)
			if strings.Contains(e.Text, "\r") || strings.Count(e.Text, "progress") > 1 {
				t.Errorf("the preview shows more than the bar's last frame: %q", e.Text)
			}
		}
	}
	if d := sent.Sub(m.Date); d < 1900*time.Millisecond {
		t.Errorf("preview %v after the command, want about 2 s", d)
	}
	if len(edits) < 6 {
		t.Fatalf("%d edits in 40 s, want about 7 at 4 s then 10 s", len(edits))
	}
	prev := sent
	for _, e := range edits[:len(edits)-1] { // the last is the final
		gap, age := e.Sub(prev), e.Sub(m.Date)
		want := 4 * time.Second
		if age > 32*time.Second {
			want = 10 * time.Second
		}
		if gap < want-150*time.Millisecond {
			t.Errorf("an edit %v after the one before at %v into the command, want at least %v", gap, age, want)
		}
		prev = e
	}
}

// TestChatPrivateDrafts: in a private chat the preview is a draft with
// Stop, and the final a reply.
func TestChatPrivateDrafts(t *testing.T) {
	p := Chats(t)
	since := p.Private.Seq()
	m := p.Private.Send(".a for i in {1..5}; do echo $i; sleep 1; done")
	d := p.Private.WaitEvent(since, ReplyTimeout, "a draft", func(e control.Event) bool { return e.Kind == "draft" && e.OK() })
	if d.Draft == nil || !d.Draft.CanStop || !strings.HasPrefix(d.Text, "⏳ #") {
		t.Errorf("draft %+v %q, want a header and Stop", d.Draft, d.Text)
	}
	if fin := p.Private.Final(m, FinalTimeout); fin.Text != "1\n2\n3\n4\n5" {
		t.Errorf("final %q", fin.Text)
	}
}

// TestChatDraftStop: Stop on a draft stops the job.
func TestChatDraftStop(t *testing.T) {
	p := Chats(t)
	since := p.Private.Seq()
	m := p.Private.Send(".a echo start; sleep 100")
	p.Private.WaitEvent(since, ReplyTimeout, "a draft with output", func(e control.Event) bool {
		return e.Kind == "draft" && e.OK() && strings.Contains(e.Text, "start")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := Telegram(t).StopDraft(ctx, control.StopDraftRequest{User: p.Admin}); err != nil {
		t.Fatal(err)
	}
	if fin := p.Private.Final(m, FinalTimeout); fin.Text != "start\n\n"+texts.StoppedNote(130) {
		t.Errorf("final %q", fin.Text)
	}
}

// runLong starts a long command in the group and returns it with its
// preview, once it runs.
func runLong(t *testing.T, chat Chat, cmd string) (control.Message, control.Message) {
	t.Helper()
	m := chat.Send(cmd)
	pv := chat.WaitMessage(ReplyTimeout, "the running preview of "+cmd, func(x control.Message) bool {
		return botReply(x, m.ID) && strings.HasPrefix(x.Text, "⏳ #") && !strings.Contains(x.Text, "waiting")
	})
	return m, pv
}

func TestChatStopForms(t *testing.T) {
	p := Chats(t)
	stopped := "The process exited 130.\n\n" + texts.StoppedNote(130)

	t.Run("reply", func(t *testing.T) {
		m, pv := runLong(t, p.Group, ".a sleep 100")
		k := p.Group.Reply(m.ID, ".k")
		if got, want := p.Group.Answer(k), texts.Stopping(JobNumber(t, pv)); got != want {
			t.Errorf(".k by reply: %q, want %q", got, want)
		}
		if fin := p.Group.Final(m, FinalTimeout); fin.Text != stopped {
			t.Errorf("final %q", fin.Text)
		}
	})
	t.Run("number", func(t *testing.T) {
		m, pv := runLong(t, p.Group, ".a sleep 100")
		n := JobNumber(t, pv)
		ls := p.Group.Answer(p.Group.Send(".k ls"))
		if !strings.Contains(ls, fmt.Sprintf("#%d", n)) || !strings.Contains(ls, "sleep 100") {
			t.Errorf(".k ls = %q, want #%d sleep 100", ls, n)
		}
		k := p.Group.Send(fmt.Sprintf(".k %d", n))
		if got := p.Group.Answer(k); got != texts.Stopping(n) {
			t.Errorf(".k N: %q", got)
		}
		if fin := p.Group.Final(m, FinalTimeout); fin.Text != stopped {
			t.Errorf("final %q", fin.Text)
		}
	})
	t.Run("button", func(t *testing.T) {
		m, pv := runLong(t, p.Group, ".a sleep 100")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		ans, err := Telegram(t).Press(ctx, control.PressRequest{User: p.Mallory, Chat: p.Group.ID, MsgID: pv.ID})
		if err != nil {
			t.Fatal(err)
		}
		if ans.Text != texts.OnlyAdmins {
			t.Errorf("a non-admin's press: toast %q", ans.Text)
		}
		ans, err = Telegram(t).Press(ctx, control.PressRequest{User: p.Admin, Chat: p.Group.ID, MsgID: pv.ID})
		if err != nil {
			t.Fatal(err)
		}
		if want := texts.Stopping(JobNumber(t, pv)); ans.Text != want {
			t.Errorf("toast %q, want %q", ans.Text, want)
		}
		if fin := p.Group.Final(m, FinalTimeout); fin.Text != stopped {
			t.Errorf("final %q", fin.Text)
		}
	})
	t.Run("trap INT", func(t *testing.T) {
		since := p.Group.Seq()
		m, pv := runLong(t, p.Group, ".a trap '' INT; echo armed; sleep 100")
		// A group's preview changes at most every 4 s: stop once it may,
		// so that "stopping…" can show before the final.
		time.Sleep(time.Until(pv.Date.Add(4 * time.Second)))
		k := p.Group.Reply(m.ID, ".k")
		p.Group.Answer(k)
		fin := p.Group.Final(m, FinalTimeout)
		if fin.Text != "armed\n\n"+texts.StoppedNote(143) {
			t.Errorf("final %q, want the output and exit 143", fin.Text)
		}
		var stopping bool
		var finalAt time.Time
		for _, e := range p.Group.EventsAfter(since) {
			if e.Kind == "edit" && e.MsgID == pv.ID && e.OK() {
				if strings.HasPrefix(e.Text, texts.HeaderStopping(JobNumber(t, pv))) {
					stopping = true
				}
				if !IsPreview(control.Message{Text: e.Text}) {
					finalAt = e.Time
				}
			}
		}
		if !stopping {
			t.Errorf("the preview never said %q", texts.HeaderStopping(JobNumber(t, pv)))
		}
		// Exit 143 shows the SIGTERM step ended it; the window only rules out
		// an early end and the SIGKILL step (4 s). How fast is for make bench.
		d := finalAt.Sub(k.Date)
		t.Logf("the final came %v after .k", d)
		if d < 1500*time.Millisecond || d >= 4*time.Second {
			t.Errorf("the final came %v after .k, want after the SIGTERM step (2 s) and before the SIGKILL step (4 s)", d)
		}
	})
}

// TestChatStopAllOverFullPool: .k all over a full pool answers, stops
// every job, and the bot still answers afterwards; .aa runs meanwhile.
func TestChatStopAllOverFullPool(t *testing.T) {
	p := Chats(t)
	var cmds []control.Message
	for i := range ShellPoolSize {
		cmds = append(cmds, p.Group.Send(fmt.Sprintf(".a echo job %d; sleep 300", i)))
	}
	for _, m := range cmds {
		p.Group.WaitMessage(2*time.Minute, "every job running", func(x control.Message) bool {
			return botReply(x, m.ID) && strings.HasPrefix(x.Text, "⏳ #") && !strings.Contains(x.Text, "waiting")
		})
	}
	direct := p.Group.Send(".aa echo direct while the pool is full")
	if fin := p.Group.Final(direct, FinalTimeout); fin.Text != "direct while the pool is full" {
		t.Errorf(".aa final %q", fin.Text)
	}
	queued := p.Group.Send(".a echo queued")
	p.Group.WaitMessage(ReplyTimeout, "the queued preview", func(x control.Message) bool {
		return botReply(x, queued.ID) && strings.Contains(x.Text, "waiting for a free shell")
	})
	k := p.Group.Send(".k all")
	lines := strings.Split(p.Group.Answer(k), "\n")
	if len(lines) != ShellPoolSize+1 {
		t.Errorf(".k all answered %d lines, want %d: %q", len(lines), ShellPoolSize+1, lines)
	}
	for i, m := range cmds {
		if fin := p.Group.Final(m, 2*time.Minute); fin.Text != fmt.Sprintf("job %d\n\n%s", i, texts.StoppedNote(130)) {
			t.Errorf("final of job %d: %q", i, fin.Text)
		}
	}
	if fin := p.Group.Final(queued, FinalTimeout); fin.Text != texts.StoppedBeforeRun {
		t.Errorf("queued job's final %q", fin.Text)
	}
	for _, c := range []Chat{p.Group, p.Private} {
		after := c.Send(".a echo still here")
		if fin := c.Final(after, FinalTimeout); fin.Text != "still here" {
			t.Errorf("after .k all: final %q", fin.Text)
		}
	}
}

// TestChatQueuedStopNeverRuns: a job queued behind the busy stateful
// worker, stopped, never runs.
func TestChatQueuedStopNeverRuns(t *testing.T) {
	p := Chats(t)
	marker := "/tmp/e2e-queued-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	busy, _ := runLong(t, p.Group, ".af sleep 100")
	q := p.Group.Send(".af touch " + marker)
	pv := p.Group.WaitMessage(ReplyTimeout, "the queued preview", func(x control.Message) bool {
		return botReply(x, q.ID) && strings.Contains(x.Text, "waiting for a free shell")
	})
	k := p.Group.Send(fmt.Sprintf(".k %d", JobNumber(t, pv)))
	p.Group.Answer(k)
	if fin := p.Group.Final(q, FinalTimeout); fin.Text != texts.StoppedBeforeRun {
		t.Errorf("final %q", fin.Text)
	}
	p.Group.Answer(p.Group.Reply(busy.ID, ".k"))
	p.Group.Final(busy, FinalTimeout)
	check := p.Group.Send(".af ls " + marker + " 2>&1 >/dev/null | wc -l")
	if fin := p.Group.Final(check, FinalTimeout); fin.Text != "1" {
		t.Errorf("the stopped job's command ran: ls says %q", fin.Text)
	}
}

func TestChatStatefulKeepsState(t *testing.T) {
	p := Chats(t)
	p.Group.Final(p.Group.Send(".af cd /tmp; X=7"), FinalTimeout)
	if fin := p.Group.Final(p.Group.Send(".af pwd; echo $X"), FinalTimeout); fin.Text != "/tmp\n7" {
		t.Errorf("final %q, want /tmp and 7", fin.Text)
	}
}

// TestChatPoolRestartMidJob: .x during a running job counts it on the old
// pool, and the job still finishes.
func TestChatPoolRestartMidJob(t *testing.T) {
	p := Chats(t)
	m, _ := runLong(t, p.Group, ".a sleep 15; echo finished on the old pool")
	x := p.Group.Send(".x")
	if got, want := p.Group.Answer(x), texts.PoolRestarted("")+"\n"+texts.OldPoolHere(1, ""); got != want {
		t.Errorf(".x: %q, want %q", got, want)
	}
	if fin := p.Group.Final(m, 2*time.Minute); fin.Text != "finished on the old pool" {
		t.Errorf("final %q", fin.Text)
	}
	WaitForPoolAvailable(t, "shell")
}

// TestChatLongOutput: a final over 4000 characters is a .txt; a flood
// stopped after 10 s ends with the real not-kept count.
func TestChatLongOutput(t *testing.T) {
	p := Chats(t)
	m := p.Group.Send(".a seq 1 3000")
	doc := p.Group.FinalFile(m, FinalTimeout)
	want := strings.TrimSuffix(seq(3000), "\n") // a final is the output trimmed
	if got := file(t, doc.Media.ID); got != want {
		t.Errorf("output.txt has %d bytes, want %d (seq 1 3000)", len(got), len(want))
	}

	flood, _ := runLong(t, p.Group, ".a yes")
	time.Sleep(10 * time.Second)
	p.Group.Answer(p.Group.Reply(flood.ID, ".k"))
	fdoc := p.Group.FinalFile(flood, 2*time.Minute)
	job := WaitForJobEnd(t, JobOf(t, p.Group, flood), JobTimeout)
	body := file(t, fdoc.Media.ID)
	// The middle not kept, and what came after the stop beyond its
	// allowance: together the status's count.
	notKept := regexp.MustCompile(`\[… (\d+) bytes (?:written after the stop )?not kept …\]`).FindAllStringSubmatch(body, -1)
	if notKept == nil {
		t.Fatalf("the flood's .txt has no not-kept line (%d bytes)", len(body))
	}
	var n int64
	for _, m := range notKept {
		v, _ := strconv.ParseInt(m[1], 10, 64)
		n += v
	}
	if n != job.Status.DroppedBytes || n < 1<<20 {
		t.Errorf("the .txt says %d bytes not kept in %d lines, the job's status %d of %d written (%s)",
			n, len(notKept), job.Status.DroppedBytes, job.Status.OutputBytes, job.Status.Phase)
		for _, m := range regexp.MustCompile(`(?s).{0,80}\[… \d+ bytes [^\]]*\].{0,80}`).FindAllString(body, -1) {
			t.Logf("in the .txt (%d bytes): %q", len(body), m)
		}
		t.Logf("the final's caption: %q", fdoc.Text)
	}
}

func TestChatInvalidUTF8(t *testing.T) {
	p := Chats(t)
	m := p.Group.Send(`.a printf 'ok\xff\xfe end\n'`)
	if fin := p.Group.Final(m, FinalTimeout); fin.Text != `ok\xff\xfe end` {
		t.Errorf("final %q, want the bad bytes as \\xNN escapes", fin.Text)
	}
}

func TestChatFilesInAndOut(t *testing.T) {
	p := Chats(t)
	doc := p.Group.SendRequest(control.SendRequest{Document: &control.Document{Name: "notes.txt", MIME: "text/plain", Data: []byte("from the chat\n")}})
	m := p.Group.Reply(doc.ID, `.a cat "$SHELLJOB_OUT/notes.txt"; echo made > "$SHELLJOB_OUT/made.txt"`)
	if fin := p.Group.Final(m, FinalTimeout); fin.Text != "from the chat" {
		t.Errorf("final %q", fin.Text)
	}
	// The group holds the made.txt of earlier runs, whose data the fake
	// may no longer keep: this command's comes after it.
	out := p.Group.WaitMessage(FinalTimeout, "made.txt", func(x control.Message) bool {
		return x.Out && x.ID > m.ID && x.Media != nil && x.Media.Name == "made.txt"
	})
	if got := file(t, out.Media.ID); got != "made\n" {
		t.Errorf("made.txt = %q", got)
	}
}

// TestChatFilesCountCapped: a command that leaves 1,000 files in
// $SHELLJOB_OUT gets its first 100 back, in name order, and a note that
// counts the other 900.
func TestChatFilesCountCapped(t *testing.T) {
	p := Chats(t)
	m := p.Group.Send(`.a cd "$SHELLJOB_OUT"; for i in {1001..2000}; do echo $i > $i.txt; done; echo made`)
	if fin := p.Group.Final(m, FinalTimeout); fin.Text != "made" {
		t.Errorf("final %q", fin.Text)
	}
	want := texts.FilesNotSent(nil, 0, 900, 100)
	p.Group.WaitMessage(5*time.Minute, "the note", func(x control.Message) bool { return botReply(x, m.ID) && x.Text == want })
	var sent []*control.Media
	for _, x := range p.Group.BotReplies(m.ID) {
		if x.Media != nil {
			sent = append(sent, x.Media)
		}
	}
	if len(sent) != 100 || sent[0].Name != "1001.txt" || sent[99].Name != "1100.txt" {
		t.Fatalf("%d files sent", len(sent))
	}
	if got := file(t, sent[0].ID); got != "1001\n" {
		t.Errorf("1001.txt = %q", got)
	}
}

// TestChatSettingsSurviveRestart: /settings render off holds after the
// bot's pod is replaced.
func TestChatSettingsSurviveRestart(t *testing.T) {
	p := Chats(t)
	p.Private.Answer(p.Private.Send("/settings render off"))
	t.Cleanup(func() { p.Private.Answer(p.Private.Send("/settings render on")) })
	restartBot(t)
	p = Chats(t)
	m := p.Private.Send(`.a printf 'a\rb\n'`)
	if fin := p.Private.Final(m, FinalTimeout); fin.Text != "a\rb" {
		t.Errorf("final %q, want the raw output (render off)", fin.Text)
	}
}

// restartBot deletes the bot's pod and waits for its successor.
func restartBot(t *testing.T) {
	t.Helper()
	deletePod(t, Namespace, "-l", "app.kubernetes.io/component=bot")
	time.Sleep(2 * time.Second)
	rolloutStatus(t, BotDeployment)
}

// TestChatBotRestartMidJob: the preview of a running job resumes on the
// new bot without blanking, and the final has every line.
func TestChatBotRestartMidJob(t *testing.T) {
	p := Chats(t)
	since := p.Group.Seq()
	m, pv := runLong(t, p.Group, ".a for i in {1..40}; do echo line $i; sleep 1; done")
	restartBot(t)
	fin := p.Group.Final(m, 3*time.Minute)
	if fin.Text != lines(40) {
		t.Errorf("final %q, want 40 lines", fin.Text)
	}
	noBlankEdits(t, p.Group, since, pv)
}

// noBlankEdits fails the test if an edit of preview pv since event since
// showed no output line.
func noBlankEdits(t *testing.T, chat Chat, since int, pv control.Message) {
	t.Helper()
	for _, e := range chat.EventsAfter(since) {
		if e.Kind == "edit" && e.MsgID == pv.ID && e.OK() && !strings.Contains(e.Text, "line") {
			t.Errorf("an edit blanked the preview: %q", e.Text)
		}
	}
}

func TestChatOperatorRestartMidJob(t *testing.T) {
	p := Chats(t)
	m, _ := runLong(t, p.Group, ".a for i in {1..20}; do echo line $i; sleep 1; done")
	deletePod(t, Namespace, "-l", "app.kubernetes.io/component=operator")
	if fin := p.Group.Final(m, 3*time.Minute); fin.Text != lines(20) {
		t.Errorf("final %q, want 20 lines", fin.Text)
	}
	rolloutStatus(t, OperatorDeployment)
}

// TestChatWorkerLost: a worker pod deleted mid-job gives the chat a final
// that says so.
func TestChatWorkerLost(t *testing.T) {
	p := Chats(t)
	m, _ := runLong(t, p.Group, ".a echo before; sleep 300")
	job := JobOf(t, p.Group, m)
	job = WaitForJobPhase(t, job, JobTimeout, shellv1alpha1.PhaseRunning)
	deletePod(t, WorkerNamespace, job.Status.Pod)
	fin := p.Group.Final(m, 2*time.Minute)
	if !strings.HasPrefix(fin.Text, "before") || !strings.Contains(strings.ToLower(fin.Text), "worker") {
		t.Errorf("final %q, want the output and a line about the lost worker", fin.Text)
	}
	WaitForPoolAvailable(t, "shell")
}

// TestChatHelmUpgradeMidJob: a helm upgrade with a new pool size while
// jobs run loses nothing.
func TestChatHelmUpgradeMidJob(t *testing.T) {
	p := Chats(t)
	var cmds []control.Message
	for i := range 3 {
		m, _ := runLong(t, p.Group, fmt.Sprintf(".a sleep 10; echo upgraded %d", i))
		cmds = append(cmds, m)
	}
	helmUpgrade(t, "--set", "pools.shell.replicas=12")
	t.Cleanup(func() { helmUpgrade(t); WaitForPoolAvailable(t, "shell") })
	for i, m := range cmds {
		if fin := p.Group.Final(m, 2*time.Minute); fin.Text != fmt.Sprintf("upgraded %d", i) {
			t.Errorf("final %q", fin.Text)
		}
	}
	pool := WaitForPoolAvailable(t, "shell")
	if pool.Spec.Replicas != 12 {
		t.Errorf("pool shell has %d replicas after the upgrade, want 12", pool.Spec.Replicas)
	}
}

// helmUpgrade runs helm upgrade of the release with its values and more.
func helmUpgrade(t *testing.T, args ...string) {
	t.Helper()
	helmRun(t, append([]string{"upgrade", "shelljob", chartDir(), "-n", Namespace, "--reuse-values", "--wait", "--timeout", "5m"}, args...)...)
}

func lines(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func seq(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%d\n", i)
	}
	return b.String()
}

// file downloads a file the bot sent.
func file(t *testing.T, id int64) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := Telegram(t).File(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestWorkerReadinessWithoutExec: worker readiness costs no exec per probe.
func TestWorkerReadinessWithoutExec(t *testing.T) {
	for _, pod := range workerPods(t, "shell", WaitForPoolAvailable(t, "shell").Status.Revision) {
		for _, c := range pod.Spec.Containers {
			if p := c.ReadinessProbe; p != nil && p.Exec != nil {
				t.Errorf("%s/%s: an exec readiness probe %v", pod.Name, c.Name, p.Exec.Command)
			}
		}
	}
}

// TestChatBotMemoryAfterFlood: a yes flood stopped after 10 s leaves the
// bot's memory where it was.
func TestChatBotMemoryAfterFlood(t *testing.T) {
	p := Chats(t)
	before := botRSS(t)
	m, _ := runLong(t, p.Group, ".a yes")
	time.Sleep(10 * time.Second)
	p.Group.Answer(p.Group.Reply(m.ID, ".k"))
	p.Group.FinalFile(m, 2*time.Minute)
	var after float64
	poll(t, time.Minute, "the bot's memory back near its level before the flood", func() (bool, string) {
		after = botRSS(t)
		return after < before+48<<20, fmt.Sprintf("%.0f MiB before, %.0f MiB now", before/(1<<20), after/(1<<20))
	})
	t.Logf("bot RSS: %.0f MiB before the flood, %.0f MiB after", before/(1<<20), after/(1<<20))
}

var rssLine = regexp.MustCompile(`(?m)^process_resident_memory_bytes ([0-9.e+]+)$`)

// botMetrics reads the bot's /metrics, through the API server's pod proxy.
func botMetrics(t *testing.T) string {
	t.Helper()
	pod := strings.TrimSpace(run(t, "-n", Namespace, "get", "pods", "-l", "app.kubernetes.io/component=bot",
		"--field-selector=status.phase=Running", "-o", "jsonpath={.items[0].metadata.name}"))
	return run(t, "get", "--raw", fmt.Sprintf("/api/v1/namespaces/%s/pods/%s:8080/proxy/metrics", Namespace, pod))
}

// botRSS reads the bot's resident memory from its metrics.
func botRSS(t *testing.T) float64 {
	t.Helper()
	m := rssLine.FindStringSubmatch(botMetrics(t))
	if m == nil {
		t.Fatalf("the bot's metrics have no process_resident_memory_bytes")
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestChatFakeTelegramReset: after the fake Telegram restarts and forgets
// every session, the bot logs in again by itself.
func TestChatFakeTelegramReset(t *testing.T) {
	api := Telegram(t)
	ctx, cancel := context.WithTimeout(context.Background(), BotRestartTimeout)
	defer cancel()
	old, err := api.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	deletePod(t, Namespace, "-l", "app.kubernetes.io/name=faketg")
	poll(t, BotRestartTimeout, "a new fake Telegram", func() (bool, string) {
		info, err := api.Info(ctx)
		if err != nil {
			return false, err.Error()
		}
		return info.Instance != old.Instance, "instance " + info.Instance
	})
	// The bot finds out when its connection to the old fake times out.
	p := Chats(t)
	if fin := p.Group.Final(p.Group.Send(".a echo back"), BotRestartTimeout); fin.Text != "back" {
		t.Errorf("final %q", fin.Text)
	}
}

// TestChatHelmUninstallMidJob: helm uninstall while a job runs gives its
// final, which says the bot is going offline, before the bot goes, and
// leaves no pool behind; then the release comes back (helm rollback, as it was kept
// with --keep-history) and the bot answers again.
func TestChatHelmUninstallMidJob(t *testing.T) {
	p := Chats(t)
	m, _ := runLong(t, p.Group, ".a echo running; sleep 300")
	t.Cleanup(func() {
		// The uninstalled revision, kept by --keep-history.
		var history []struct {
			Revision int `json:"revision"`
		}
		if err := json.Unmarshal([]byte(helmRun(t, "history", "shelljob", "-n", Namespace, "-o", "json")), &history); err != nil || len(history) == 0 {
			t.Fatalf("helm history: %v", err)
		}
		helmRun(t, "rollback", "shelljob", strconv.Itoa(history[len(history)-1].Revision), "-n", Namespace, "--wait", "--timeout", "5m")
		WaitForPoolAvailable(t, "shell")
		WaitForPoolAvailable(t, "plugin")
		rolloutStatus(t, BotDeployment)
		if fin := p.Group.Final(p.Group.Send(".a echo back"), BotRestartTimeout); fin.Text != "back" {
			t.Errorf("after the rollback: final %q", fin.Text)
		}
	})
	helmRun(t, "uninstall", "shelljob", "-n", Namespace, "--keep-history", "--wait", "--timeout", "5m")
	if fin := p.Group.Final(m, FinalTimeout); fin.Text != "running\n\n"+texts.StoppedShutdownNote(130) {
		t.Errorf("final %q, want the output and the going-offline note", fin.Text)
	}
	var pools shellv1alpha1.ShellPoolList
	if err := c.List(context.Background(), &pools, client.InNamespace(Namespace)); err != nil {
		t.Fatal(err)
	}
	for _, pool := range pools.Items {
		if _, e2e := pool.Labels[labelPool]; !e2e {
			t.Errorf("pool %s is left after the uninstall (deleting: %v, finalizers %v)", pool.Name, pool.DeletionTimestamp != nil, pool.Finalizers)
		}
	}
}

// TestChatWorkerLimits: a command that fills its worker's memory is killed
// at the memory limit, and one that fills its spool gets its worker
// evicted at the spool's sizeLimit. Each job says so in its status, an
// Event and its final; a job on another worker runs on untouched.
func TestChatWorkerLimits(t *testing.T) {
	p := Chats(t)
	neighbour, _ := runLong(t, p.Group, ".a sleep 30; echo neighbour done")
	ended := func(t *testing.T, cmd control.Message, timeout time.Duration, reason, says string) {
		t.Helper()
		fin := p.Group.Final(cmd, timeout)
		job := WaitForJobEnd(t, JobOf(t, p.Group, cmd), JobTimeout)
		c := meta.FindStatusCondition(job.Status.Conditions, shellv1alpha1.ShellJobFinished)
		if job.Status.Phase != shellv1alpha1.PhaseFailed || c == nil || c.Reason != reason || !strings.Contains(c.Message, says) {
			t.Errorf("job %s: phase %s, finished %+v; want Failed, %s, %q", job.Name, job.Status.Phase, c, reason, says)
		}
		if _, ok := EventTimes(t, reason)[job.Name]; !ok {
			t.Errorf("job %s has no %s Event", job.Name, reason)
		}
		if !strings.Contains(fin.Text, says) {
			t.Errorf("final %q, want it to say %q", fin.Text, says)
		}
	}
	t.Run("memory", func(t *testing.T) {
		m := p.Group.Send(".a head -c 1500M /dev/zero | tail -n1 >/dev/null")
		ended(t, m, 2*time.Minute, shellv1alpha1.ShellJobFinishedReasonOutOfMemory, "out of memory")
	})
	t.Run("spool", func(t *testing.T) {
		m := p.Group.Send(`.a dd if=/dev/zero of="$SHELLJOB_OUT/fill" bs=1M count=1500; sleep 600`)
		ended(t, m, 4*time.Minute, shellv1alpha1.ShellJobFinishedReasonWorkerEvicted, `exceeds the limit`)
	})
	if fin := p.Group.Final(neighbour, 2*time.Minute); fin.Text != "neighbour done" {
		t.Errorf("the neighbour's final %q", fin.Text)
	}
	WaitForPoolAvailable(t, "shell")
}

// TestChatBotMetrics: the bot's /metrics show a running job, its follower
// and the output memory it holds, and the Telegram calls and updates that
// carried it; once the final is out, no follower and no output memory are
// left.
func TestChatBotMetrics(t *testing.T) {
	p := Chats(t)
	m, _ := runLong(t, p.Group, ".a seq 1 20; sleep 30")
	value := func(metrics, series string) float64 {
		for _, l := range strings.Split(metrics, "\n") {
			if v, ok := strings.CutPrefix(l, series+" "); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatalf("%s: %q", series, l)
				}
				return f
			}
		}
		t.Fatalf("no %s on the bot's /metrics", series)
		return 0
	}
	atLeast := map[string]float64{
		`shelljob_bot_jobs{state="running"}`:                                               1,
		`shelljob_bot_followers`:                                                           1,
		`shelljob_bot_output_memory_bytes`:                                                 1,
		`shelljob_bot_updates_total{kind="message"}`:                                       1,
		`shelljob_bot_telegram_call_duration_seconds_count{method="messages.sendMessage"}`: 1,
	}
	poll(t, 20*time.Second, "the running job on the bot's /metrics", func() (bool, string) {
		running := botMetrics(t)
		for series, least := range atLeast {
			if v := value(running, series); v < least {
				return false, fmt.Sprintf("%s = %v, want at least %v", series, v, least)
			}
		}
		return true, ""
	})
	p.Group.Answer(p.Group.Reply(m.ID, ".k"))
	p.Group.Final(m, FinalTimeout)
	poll(t, 30*time.Second, "no follower and no output memory held", func() (bool, string) {
		after := botMetrics(t)
		f, o := value(after, "shelljob_bot_followers"), value(after, "shelljob_bot_output_memory_bytes")
		return f == 0 && o == 0, fmt.Sprintf("followers %v, output memory %v bytes", f, o)
	})
}
