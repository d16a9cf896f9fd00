//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/faketg/control"
	"shelljob.dev/shelljob/internal/texts"
)

// TestChatBotKilledMidJob: the bot's process is killed (SIGKILL, no
// shutdown at all) while a job runs; its container restarts, the preview
// resumes without blanking, and the final has every line.
func TestChatBotKilledMidJob(t *testing.T) {
	p := Chats(t)
	since := p.Group.Seq()
	m, pv := runLong(t, p.Group, ".a for i in {1..30}; do echo line $i; sleep 1; done")
	killBot(t)
	rolloutStatus(t, BotDeployment)
	fin := p.Group.Final(m, 3*time.Minute)
	if fin.Text != lines(30) {
		t.Errorf("final %q, want 30 lines", fin.Text)
	}
	noBlankEdits(t, p.Group, since, pv)
}

// killBot SIGKILLs the bot's processes, with no shutdown at all, and
// waits until its container restarted.
func killBot(t *testing.T) {
	t.Helper()
	bot := botCgroup(t)
	restarts := botRestarts(t)
	if out, err := dockerExec(bot.node, "sh", "-c", fmt.Sprintf("kill -KILL $(cat %s/cgroup.procs)", bot.dir)); err != nil {
		t.Fatalf("kill the bot's processes: %v\n%s", err, out)
	}
	poll(t, 2*time.Minute, "the bot's container restarted", func() (bool, string) {
		n := botRestarts(t)
		return n > restarts, fmt.Sprintf("restarts %d", n)
	})
}

// botRestarts is the restart count of the bot's container.
func botRestarts(t *testing.T) int {
	t.Helper()
	out := strings.TrimSpace(run(t, "-n", Namespace, "get", "pods", "-l", "app.kubernetes.io/component=bot",
		"--field-selector=status.phase=Running", "-o",
		`jsonpath={range .items[*].status.containerStatuses[?(@.name=="bot")]}{.restartCount}{end}`))
	var n int
	if _, err := fmt.Sscan(out, &n); err != nil {
		t.Fatalf("the bot's restart count: %q", out)
	}
	return n
}

// TestChatHugeOutputFile: a command that leaves 400 MB in $SHELLJOB_OUT
// gets its final and a note that the file is over the limit; the bot
// streams past it, and neither restarts nor sends it again.
func TestChatHugeOutputFile(t *testing.T) {
	p := Chats(t)
	restarts := botRestarts(t)
	m := p.Group.Send(`.a head -c 400M /dev/zero > "$SHELLJOB_OUT/big.bin"; echo small > "$SHELLJOB_OUT/small.txt"; echo done`)
	if fin := p.Group.Final(m, 2*time.Minute); fin.Text != "done" {
		t.Errorf("final %q, want done", fin.Text)
	}
	isNote := func(x control.Message) bool { return botReply(x, m.ID) && strings.Contains(x.Text, "big.bin") }
	note := p.Group.WaitMessage(2*time.Minute, "the note about big.bin", isNote)
	if want := texts.FilesSkipped([]string{texts.OutFileTooBig("big.bin", 400<<20, 50<<20)}); note.Text != want {
		t.Errorf("note %q, want %q", note.Text, want)
	}
	small := p.Group.WaitMessage(FinalTimeout, "small.txt", func(x control.Message) bool {
		return x.Out && x.Media != nil && x.Media.Name == "small.txt"
	})
	if got := file(t, small.Media.ID); got != "small\n" {
		t.Errorf("small.txt = %q", got)
	}
	// Nothing comes again: no restart, no second note.
	time.Sleep(10 * time.Second)
	if n := botRestarts(t); n != restarts {
		t.Errorf("the bot restarted %d times", n-restarts)
	}
	notes := 0
	for _, x := range p.Group.Messages() {
		if isNote(x) {
			notes++
		}
	}
	if notes != 1 {
		t.Errorf("%d notes about big.bin, want 1", notes)
	}
}

// TestChatRepliedFileTooBig: a command that replies to a 1 GB file is
// refused from the size its message gives, before any download, and no
// job is made.
func TestChatRepliedFileTooBig(t *testing.T) {
	p := Chats(t)
	doc := p.Group.SendRequest(control.SendRequest{Document: &control.Document{Name: "huge.bin", MIME: "application/octet-stream", Size: 1 << 30}})
	m := p.Group.Reply(doc.ID, ".a wc -c huge.bin")
	if got, want := p.Group.Answer(m), texts.InFileTooBig("huge.bin", 1<<30, 50<<20); got != want {
		t.Errorf("answer %q, want %q", got, want)
	}
	if jobs := jobsOf(t, p.Group, m); len(jobs) != 0 {
		t.Errorf("jobs made for a refused command: %v", jobs)
	}
}

// TestChatRestartDuringShutdown: the bot's pod is deleted while a job runs,
// and a command is sent as the bot shuts down. A restart stops nothing: the
// running job's final comes from the next bot, whole. The command gets one
// answer, whichever bot takes it, and its job is made once: an answer under
// way when the bot shuts down is finished, and the next bot, which gets
// the message again, finds it handled.
func TestChatRestartDuringShutdown(t *testing.T) {
	p := Chats(t)
	m1, _ := runLong(t, p.Group, ".a for i in {1..20}; do echo line $i; sleep 1; done")
	run(t, "-n", Namespace, "delete", "pod", "-l", "app.kubernetes.io/component=bot", "--wait=false")
	m2 := p.Group.Send(".a echo once")
	if fin := p.Group.Final(m1, 3*time.Minute); fin.Text != lines(20) {
		t.Errorf("the running job's final %q, want 20 lines", fin.Text)
	}
	if fin := p.Group.Final(m2, 3*time.Minute); fin.Text != "once" {
		t.Errorf("the final of the command sent during the shutdown: %q, want once", fin.Text)
	}
	rolloutStatus(t, BotDeployment)
	time.Sleep(10 * time.Second)
	if replies := p.Group.BotReplies(m2.ID); len(replies) != 1 {
		t.Errorf("%d answers to the command sent during the shutdown, want 1: %s", len(replies), describe(replies, 3))
	}
	if jobs := jobsOf(t, p.Group, m2); len(jobs) != 1 {
		t.Errorf("jobs of the command sent during the shutdown: %v, want one", jobs)
	}
}

// TestChatHeldJobAtRestart: a job held for its replied-to file when the bot
// is killed (its pool was full, so the file was not in place yet) is
// stopped before it runs by the next bot, which tells the chat to send it
// again, and the pool's next job runs as usual.
func TestChatHeldJobAtRestart(t *testing.T) {
	p := Chats(t)
	pool := WaitForPoolAvailable(t, "shell")
	busy := fillPool(t, "shell", int(pool.Spec.Replicas))
	doc := p.Group.SendRequest(control.SendRequest{Document: &control.Document{Name: "notes.txt", MIME: "text/plain", Data: []byte("from the chat\n")}})
	m := p.Group.Reply(doc.ID, `.a cat "$SHELLJOB_OUT/notes.txt"`)
	var held *shellv1alpha1.ShellJob
	poll(t, ReplyTimeout, "the job, held", func() (bool, string) {
		jobs, err := listJobsOf(p.Group, m)
		if err != nil || len(jobs) != 1 {
			return false, fmt.Sprintf("%d jobs, %v", len(jobs), err)
		}
		held = jobs[0]
		return held.Spec.Hold, fmt.Sprintf("hold %v", held.Spec.Hold)
	})
	killBot(t)
	if got := Get(t, held); got.Status.Ran || got.Status.Pod != "" {
		t.Fatalf("the held job was placed on %q (ran %v) while the pool was full", got.Status.Pod, got.Status.Ran)
	}
	want := texts.StoppedBeforeRun + "\n\n" + texts.HeldAtRestart
	if fin := p.Group.Final(m, BotRestartTimeout); fin.Text != want {
		t.Errorf("final %q, want %q", fin.Text, want)
	}
	if got := WaitForJobEnd(t, held, JobTimeout); got.Status.Ran {
		t.Errorf("the held job ran: phase %s", got.Status.Phase)
	}
	StopAll(t, busy)
	if fin := p.Group.Final(p.Group.Send(".a echo after"), FinalTimeout); fin.Text != "after" {
		t.Errorf("the next job's final %q", fin.Text)
	}
}
