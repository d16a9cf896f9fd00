//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/bot/preview"
	"shelljob.dev/shelljob/internal/faketg/control"
	"shelljob.dev/shelljob/internal/texts"
)

// binaryOutput is the command of the finals that once took the bot down:
// 40 MiB of random bytes, which the spool keeps 32 MiB of, every byte of
// them to escape or render.
const binaryOutput = ".a head -c 40M /dev/urandom"

// memoryBackWithin is how long after its last final the bot's memory must
// be back within floodBar of its rest.
const memoryBackWithin = time.Minute

// TestChatBinaryFinals: two 40 MiB random outputs at once. Both finals and
// their output.txt arrive, the bot does not restart, answers the next
// command, and its memory is back within floodBar of its rest a minute
// later. Their text is made by the agents, not the bot (agentapi.TextMagic).
func TestChatBinaryFinals(t *testing.T) {
	p := Chats(t)
	bot := botCgroup(t)
	restarts := botRestarts(t)
	idle := bot.usage(t)
	cmds := sendAll(t, p.Group, 2, binaryOutput)
	for _, cmd := range cmds {
		f := p.Group.FinalFile(cmd, 5*time.Minute)
		if f.Media.Size < 32<<20 {
			t.Errorf("the output.txt of message %d holds %d bytes, want the 32 MiB the spool kept, escaped", cmd.ID, f.Media.Size)
		}
		// A long final with no preview is its output.txt alone.
		for _, x := range p.Group.BotReplies(cmd.ID) {
			if strings.Contains(x.Text, "⚠") {
				t.Errorf("a reply to message %d has a warning: %q", cmd.ID, tail(x.Text, 200))
			}
		}
	}
	if n := botRestarts(t); n != restarts {
		t.Fatalf("the bot restarted %d times", n-restarts)
	}
	if fin := p.Group.Final(p.Group.Send(".a echo alive"), FinalTimeout); fin.Text != "alive" {
		t.Errorf("the next command's final %q, want alive", fin.Text)
	}
	memoryBack(t, bot, idle)
}

// memoryBack waits, up to memoryBackWithin, for the bot's memory to come
// back within floodBar of idle.
func memoryBack(t *testing.T, bot memCgroup, idle int64) {
	t.Helper()
	poll(t, memoryBackWithin, fmt.Sprintf("the bot's memory back within %d MiB of its %d MiB at rest", floodBar>>20, idle>>20), func() (bool, string) {
		now := bot.usage(t)
		return now-idle < floodBar, fmt.Sprintf("%d MiB", now>>20)
	})
}

// TestChatBotKilledDuringFinal: the bot is killed while it delivers a
// final of 40 MiB random bytes. The next bot sends that final once more in
// its small form (how the job ended, and the note), never the output it
// died on, and does not restart again.
func TestChatBotKilledDuringFinal(t *testing.T) {
	p := Chats(t)
	m := p.Group.Send(binaryOutput + "; exit 7")
	poll(t, 3*time.Minute, "the final's delivery recorded", func() (bool, string) {
		jobs, err := listJobsOf(p.Group, m)
		if err != nil || len(jobs) != 1 {
			return false, fmt.Sprintf("%d jobs, %v", len(jobs), err)
		}
		_, attempted := jobs[0].Annotations[shellv1alpha1.AnnotationFinalAttempted]
		_, delivered := jobs[0].Annotations[shellv1alpha1.AnnotationDelivered]
		if delivered {
			t.Fatal("the final was delivered before the bot could be killed")
		}
		return attempted, "not yet"
	})
	killBot(t)
	restarts := botRestarts(t)
	want := preview.Final("", 7, true, preview.NotStopped, texts.FinalNotSent)
	p.Group.WaitMessage(BotRestartTimeout, "the small final", func(x control.Message) bool {
		return botReply(x, m.ID) && !x.Deleted && x.Text == want
	})
	if fin := p.Group.Final(p.Group.Send(".a echo alive"), BotRestartTimeout); fin.Text != "alive" {
		t.Errorf("the next command's final %q, want alive", fin.Text)
	}
	time.Sleep(20 * time.Second)
	if n := botRestarts(t); n != restarts {
		t.Errorf("the bot restarted %d more times after the kill", n-restarts)
	}
}

// TestChatStopRefused: while the API server refuses the admin's patches
// of ShellJobs (the patch verb taken away from the chat admins' Role, as
// whom the bot stops a job), a .k says so in the chat, and the job runs
// on, its preview not stopping; once the verb is back, a .k stops it.
func TestChatStopRefused(t *testing.T) {
	p := Chats(t)
	m, pv := runLong(t, p.Group, ".a echo tick; sleep 100")
	n := JobNumber(t, pv)
	role := BotDeployment + "-telegram" // the chart's Role of the chat admins
	verbs := strings.TrimSpace(run(t, "-n", Namespace, "get", "role", role, "-o", "jsonpath={.rules[0].verbs}"))
	if !strings.Contains(verbs, "patch") || !strings.Contains(run(t, "-n", Namespace, "get", "role", role, "-o", "jsonpath={.rules[0].resources}"), "shelljobs") {
		t.Fatalf("the chat admins' Role's first rule is not the one on shelljobs with patch: %s", verbs)
	}
	setVerbs := func(v string) {
		run(t, "-n", Namespace, "patch", "role", role, "--type=json", "-p", `[{"op":"replace","path":"/rules/0/verbs","value":`+v+`}]`)
	}
	// The admin's default identity (the chart lists none for them).
	admin := []string{"--as", fmt.Sprintf("shelljob:telegram:%d", p.Admin), "--as-group", "shelljob:telegram"}
	canPatch := func() string {
		out, _ := kubectlCmd(append([]string{"-n", Namespace, "auth", "can-i", "patch", "shelljobs.shell.shelljob.dev"}, admin...)...).Output()
		return strings.TrimSpace(string(out))
	}
	setVerbs(`["create","get"]`)
	t.Cleanup(func() { setVerbs(verbs) })
	poll(t, ReplyTimeout, "the admin refused patch", func() (bool, string) { c := canPatch(); return c == "no", c })

	job := JobOf(t, p.Group, m)
	if ans := p.Group.Answer(p.Group.Send(".k")); !strings.HasPrefix(ans, fmt.Sprintf("⚠ Could not stop #%d: ", n)) || !strings.Contains(ans, "forbidden") {
		t.Errorf(".k while the patch is refused: %q", ans)
	}
	if got := Get(t, job); got.Spec.Stop || got.Status.Phase != shellv1alpha1.PhaseRunning {
		t.Errorf("after the refused stop: stop %v, phase %s", got.Spec.Stop, got.Status.Phase)
	}
	time.Sleep(6 * time.Second) // past a group preview's next edit
	for _, x := range p.Group.Messages() {
		if x.ID == pv.ID && strings.HasPrefix(x.Text, "⏹") {
			t.Errorf("the preview says %q after a refused stop", x.Text)
		}
	}

	setVerbs(verbs)
	poll(t, ReplyTimeout, "the admin allowed patch again", func() (bool, string) { c := canPatch(); return c == "yes", c })
	if ans := p.Group.Answer(p.Group.Send(".k")); ans != texts.Stopping(n) {
		t.Errorf(".k once the patch is allowed: %q", ans)
	}
	if fin := p.Group.Final(m, FinalTimeout); fin.Text != "tick\n\n"+texts.StoppedNote(130) {
		t.Errorf("final %q", fin.Text)
	}
}

// TestChatHundredThousandFiles: a command that leaves 100,000 files in
// $SHELLJOB_OUT gets its final, the first 100 files and one note counting
// the rest; the bot does not restart, answers the next command, and its
// memory is back within floodBar of its rest a minute later.
func TestChatHundredThousandFiles(t *testing.T) {
	p := Chats(t)
	bot := botCgroup(t)
	restarts := botRestarts(t)
	idle := bot.usage(t)
	m := p.Group.Send(`.a cd "$SHELLJOB_OUT" && for i in {100001..200000}; do : > $i; done; echo made`)
	if fin := p.Group.Final(m, 5*time.Minute); fin.Text != "made" {
		t.Errorf("final %q, want made", fin.Text)
	}
	want := texts.FilesNotSent(nil, 0, 99900, 100)
	p.Group.WaitMessage(10*time.Minute, "the note", func(x control.Message) bool { return botReply(x, m.ID) && x.Text == want })
	sent := 0
	for _, x := range p.Group.BotReplies(m.ID) {
		if x.Media != nil {
			sent++
		}
	}
	if sent != 100 {
		t.Errorf("%d files sent, want 100", sent)
	}
	if n := botRestarts(t); n != restarts {
		t.Fatalf("the bot restarted %d times", n-restarts)
	}
	if fin := p.Group.Final(p.Group.Send(".a echo alive"), FinalTimeout); fin.Text != "alive" {
		t.Errorf("the next command's final %q, want alive", fin.Text)
	}
	memoryBack(t, bot, idle)
}
