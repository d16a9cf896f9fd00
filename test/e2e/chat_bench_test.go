//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/faketg/control"
	jobstate "shelljob.dev/shelljob/internal/shelljob"
	"shelljob.dev/shelljob/internal/texts"
)

// TestBenchChat measures the whole stack through the fake Telegram, each
// figure beside a baseline measured in the same run. It prints "BENCH name
// value unit" lines for hack/bench.sh (section chat) and asserts nothing
// about speed, only that nothing is lost; it runs only with E2E_BENCH=1.
//
//   - reply: `.a true` sent → its one reply seen in the chat (the fake's
//     clock), at rest and with 15 of the 16 shell workers busy writing
//     output; baseline: `kubectl exec POD -- zsh -c true` → it returns.
//   - preview: `.a sleep 5` sent → its first preview (the bot waits 2 s
//     by design, as the reference does).
//   - stop: `.k` sent as a reply to `.a sleep 100` → the final seen;
//     baseline: kubectl exec of `pkill -INT sleep` → the kubectl exec that
//     ran the sleep returns.
//   - soak: E2E_SOAK_JOBS (default 500) `.a seq` jobs through the 16-worker
//     pool, E2E_SOAK_INFLIGHT (default 32) at a time: jobs, finals and
//     lines lost (each must be 0), the peak memory of the operator, the bot
//     and a worker (their cgroups' high-water marks on the kind nodes), and
//     the API writes per job (the API server's request counters).
func TestBenchChat(t *testing.T) {
	if os.Getenv("E2E_BENCH") == "" {
		t.Skip("E2E_BENCH is not set: hack/bench.sh chat runs this")
	}
	p := Chats(t)
	pool := WaitForPoolAvailable(t, "shell")
	pod := workerPods(t, "shell", pool.Status.Revision)[0].Name
	// 40 samples put the p95 below the two slowest; the first of each
	// kind, which sets up connections, is not counted.
	const samples = 40
	replyLatency(t, p.Group)
	execWall(t, pod, "zsh", "-c", "true")

	var reply, replyBase []time.Duration
	for range samples {
		reply = append(reply, replyLatency(t, p.Group))
		replyBase = append(replyBase, execWall(t, pod, "zsh", "-c", "true"))
	}
	report("chat_reply_p50", pct(reply, 50), "ms")
	report("chat_reply_p95", pct(reply, 95), "ms")
	report("chat_reply_base_p50", pct(replyBase, 50), "ms")
	report("chat_reply_base_p95", pct(replyBase, 95), "ms")

	var preview []time.Duration
	for range 5 {
		m := p.Group.Send(".a sleep 5")
		pv := p.Group.Preview(m, ReplyTimeout)
		preview = append(preview, pv.Date.Sub(m.Date))
		p.Group.Final(m, FinalTimeout)
	}
	report("chat_preview_p50", pct(preview, 50), "ms")

	var stop, stopBase []time.Duration
	for range 5 {
		stop = append(stop, stopLatency(t, p.Group))
		stopBase = append(stopBase, stopExec(t, pod))
	}
	report("chat_stop_p50", pct(stop, 50), "ms")
	report("chat_stop_base_p50", pct(stopBase, 50), "ms")

	busy := make([]control.Message, ShellPoolSize-1)
	for i := range busy {
		busy[i], _ = runLong(t, p.Group, ".a while :; do echo busy; sleep 0.05; done")
	}
	var busyReply, busyBase, busyStop []time.Duration
	for range samples {
		busyReply = append(busyReply, replyLatency(t, p.Group))
		busyBase = append(busyBase, execWall(t, pod, "zsh", "-c", "true"))
	}
	for range 3 {
		busyStop = append(busyStop, stopLatency(t, p.Group))
	}
	p.Group.Answer(p.Group.Send(".k all"))
	for _, m := range busy {
		p.Group.WaitMessage(2*time.Minute, "the busy job's end", func(x control.Message) bool {
			return botReply(x, m.ID) && !IsPreview(x) && (len(x.Buttons) == 0)
		})
	}
	report("chat_busy_reply_p50", pct(busyReply, 50), "ms")
	report("chat_busy_reply_base_p50", pct(busyBase, 50), "ms")
	report("chat_busy_stop_p50", pct(busyStop, 50), "ms")

	soak(t, p)
}

// replyLatency sends `.a true` and returns the time to its one reply, both
// stamped by the fake.
func replyLatency(t *testing.T, chat Chat) time.Duration {
	t.Helper()
	m := chat.Send(".a true")
	fin := chat.Final(m, FinalTimeout)
	if fin.Text != texts.ProcessExited(0) {
		t.Fatalf("final %q", fin.Text)
	}
	return fin.Date.Sub(m.Date)
}

// stopLatency runs `.a sleep 100`, sends .k as a reply, and returns the time
// from the .k to the final, both stamped by the fake.
func stopLatency(t *testing.T, chat Chat) time.Duration {
	t.Helper()
	m, _ := runLong(t, chat, ".a sleep 100")
	k := chat.Reply(m.ID, ".k")
	fin := chat.Final(m, FinalTimeout)
	at := fin.Date
	if fin.EditDate != nil {
		at = *fin.EditDate
	}
	return at.Sub(k.Date)
}

// execWall is the wall time of a plain kubectl exec of command.
func execWall(t *testing.T, pod string, command ...string) time.Duration {
	t.Helper()
	start := time.Now()
	run(t, append([]string{"-n", WorkerNamespace, "exec", pod, "-c", agentapi.WorkerContainer, "--"}, command...)...)
	return time.Since(start)
}

var seqFinal = regexp.MustCompile(`^soak (\d+)\n`)

func soak(t *testing.T, p People) {
	jobs, inflight := 500, 32
	if n, err := strconv.Atoi(os.Getenv("E2E_SOAK_JOBS")); err == nil && n > 0 {
		jobs = n
	}
	if n, err := strconv.Atoi(os.Getenv("E2E_SOAK_INFLIGHT")); err == nil && n > 0 {
		inflight = n
	}
	writes0 := apiWrites(t)
	start := time.Now()
	var (
		mu                          sync.Mutex
		lostJobs, lostFinals, lines int
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	finals := watchFinals(ctx, p.Group)
	sem := make(chan struct{}, inflight)
	var wg sync.WaitGroup
	for i := range jobs {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			n := 1 + i%200
			m := p.Group.Send(fmt.Sprintf(".a echo soak %d; seq 1 %d", i, n))
			fin, ok := finals.wait(m, 5*time.Minute)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case !ok:
				lostFinals++
			case seqFinal.FindStringSubmatch(fin) == nil:
				lostJobs++
				if lostJobs <= 5 {
					t.Logf("the final of %q is not its output: %q", m.Text, fin)
				}
			default:
				want := fmt.Sprintf("soak %d\n%s", i, strings.TrimSuffix(seq(n), "\n"))
				if fin != want {
					lines += n + 1 - strings.Count(fin, "\n") - 1
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	report("soak_jobs", float64(jobs), "jobs")
	report("soak_seconds", elapsed.Seconds(), "s")
	report("soak_jobs_lost", float64(lostJobs), "jobs")
	report("soak_finals_lost", float64(lostFinals), "finals")
	report("soak_lines_lost", float64(lines), "lines")
	report("soak_api_writes_per_job", float64(apiWrites(t)-writes0)/float64(jobs), "writes")
	for _, c := range []struct{ name, selector, ns string }{
		{"operator", "app.kubernetes.io/component=operator", Namespace},
		{"bot", "app.kubernetes.io/component=bot", Namespace},
		{"worker", "shell.shelljob.dev/pool=shell", WorkerNamespace},
	} {
		report("soak_peak_mem_"+c.name, float64(peakMemory(t, c.ns, c.selector))/(1<<20), "MiB")
	}
	if lostJobs+lostFinals+lines != 0 {
		t.Errorf("soak lost %d jobs, %d finals and %d lines", lostJobs, lostFinals, lines)
	}
}

// finalWatch finds the finals of many commands of one chat with one reader
// of the chat: each read is the chat's whole history, and 32 readers a
// second of a history of thousands of messages loaded the fake Telegram
// more than the bot did (BENCHMARKS.md, "The soak's pace").
type finalWatch struct {
	chat Chat
	mu   sync.Mutex
	// finals are the final texts found so far, by their command's id.
	finals map[int]string
	cmds   map[int]control.Message
}

// watchFinals reads the chat every second until ctx ends.
func watchFinals(ctx context.Context, chat Chat) *finalWatch {
	w := &finalWatch{chat: chat, finals: map[int]string{}, cmds: map[int]control.Message{}}
	go func() {
		for {
			w.read(ctx)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}()
	return w
}

func (w *finalWatch) read(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ms, err := w.chat.api.Messages(ctx, w.chat.ID)
	if err != nil {
		// The port-forward can drop under load; the next read tries again.
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range ms.Messages {
		if cmd, ok := w.cmds[m.ReplyTo]; ok && IsFinalOf(cmd, m) {
			w.finals[cmd.ID] = m.Text
		}
	}
}

// wait is Chat.Final that reports a timeout instead of failing, so a soak
// counts what it lost.
func (w *finalWatch) wait(cmd control.Message, timeout time.Duration) (string, bool) {
	w.mu.Lock()
	w.cmds[cmd.ID] = cmd
	w.mu.Unlock()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		w.mu.Lock()
		fin, ok := w.finals[cmd.ID]
		w.mu.Unlock()
		if ok {
			return fin, true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return "", false
}

var writeCounter = regexp.MustCompile(`(?m)^apiserver_request_total\{([^}]*)\} ([0-9.e+]+)$`)

// apiWrites sums the API server's create, update and patch requests on
// ShellJobs, ShellPools, pods and configmaps so far.
func apiWrites(t *testing.T) float64 {
	t.Helper()
	var sum float64
	for _, m := range writeCounter.FindAllStringSubmatch(run(t, "get", "--raw", "/metrics"), -1) {
		labels := m[1]
		if !regexp.MustCompile(`verb="(POST|PUT|PATCH|APPLY)"`).MatchString(labels) ||
			!regexp.MustCompile(`resource="(shelljobs|shellpools|pods|configmaps)"`).MatchString(labels) {
			continue
		}
		v, _ := strconv.ParseFloat(m[2], 64)
		sum += v
	}
	return sum
}

// peakMemory is the highest memory high-water mark (cgroup v1
// memory.max_usage_in_bytes, or v2 memory.peak) among the containers of
// the pods that selector picks, read on their kind nodes.
func peakMemory(t *testing.T, ns, selector string) int64 {
	t.Helper()
	var peak int64
	out := run(t, "-n", ns, "get", "pods", "-l", selector, "-o",
		`jsonpath={range .items[*]}{.spec.nodeName} {.metadata.uid}{"\n"}{end}`)
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		node, uid, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		script := fmt.Sprintf(`for f in $(find /sys/fs/cgroup -path '*pod%[1]s*' \( -name memory.max_usage_in_bytes -o -name memory.peak \) 2>/dev/null) $(find /sys/fs/cgroup -path '*pod%[2]s*' \( -name memory.max_usage_in_bytes -o -name memory.peak \) 2>/dev/null); do cat "$f"; done`,
			uid, strings.ReplaceAll(uid, "-", "_"))
		b, err := dockerExec(node, "sh", "-c", script)
		if err != nil {
			t.Logf("peak memory of %s on %s: %v", uid, node, err)
			continue
		}
		for _, f := range strings.Fields(b) {
			if v, err := strconv.ParseInt(f, 10, 64); err == nil && v > peak {
				peak = v
			}
		}
	}
	return peak
}

// floodCounts are the numbers of concurrent `yes` floods of
// TestBenchChatFloods; E2E_FLOODS (comma-separated) changes them. 64,
// which the issue asks for too, is left out: on a 2-CPU machine it starves
// the cluster (BENCHMARKS.md).
const floodCounts = "1,16"

const (
	// floodFor is how long the floods run before the .k all.
	floodFor = 10 * time.Second
	// floodSettle is how long after the last final the bot's memory is
	// read again, to see whether it was given back: within floodBar of
	// its rest.
	floodSettle = memoryBackWithin
	// floodBar is the bar: the bot's peak stays under this above
	// its memory at rest.
	floodBar = 64 << 20
	// floodCPU is the CPU, in millicores, that the workers of n floods
	// may use together: each gets floodCPU/n.
	floodCPU = 1000
)

// TestBenchChatFloods: n `.a yes` floods sent at once in the group (n =
// 1 and 16; E2E_FLOODS=1,16,64 adds 64), stopped with .k all after 10 s;
// then two at once of each floodClass: a coloured and a \r flood of the
// same kind, and two 40 MiB random outputs that end by themselves. It
// reports the bot container's memory at rest before, its peak from the
// first command to the last final, and its memory a minute after, from its
// cgroup on its kind node; and fails when the peak or the memory a minute
// after is 64 MiB or more above the rest, when a final is lost, or when one
// does not end with the stop line (a stopped class) or has a warning.
//
// The shell pool gets n workers (at least the chart's 16), as one job runs
// on a worker at a time, and the floods one CPU in all: each worker asks
// for 10m and may use 1/n of a CPU. At the chart's 100m and 2 CPUs each,
// 64 workers do not fit the two kind nodes of a 2-CPU machine, and 16
// floods starved the API server there until the operator lost its lease.
// A flood still writes more in 10 s than the spool keeps (its first and
// last 16 MiB), which is what a final is built from: the smallest kept
// output is reported. The pool is put back as it was at the end.
//
// It runs with E2E_BENCH=1, after TestBenchChat: it resets the bot's
// high-water mark, which the soak reads.
func TestBenchChatFloods(t *testing.T) {
	if os.Getenv("E2E_BENCH") == "" {
		t.Skip("E2E_BENCH is not set: hack/bench.sh chat runs this")
	}
	var counts []int
	for _, f := range strings.Split(envOr("E2E_FLOODS", floodCounts), ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			t.Fatalf("E2E_FLOODS: %q is not a number of floods", f)
		}
		counts = append(counts, n)
	}
	p := Chats(t)
	restoreShellPool(t)
	for _, n := range counts {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			chat := p.Group
			chat.t = t
			flood(t, chat, n, floodClass{name: strconv.Itoa(n), cmd: ".a yes", stopped: true})
		})
	}
	for _, c := range floodClasses {
		t.Run(c.name, func(t *testing.T) {
			chat := p.Group
			chat.t = t
			flood(t, chat, 2, c)
		})
	}
}

// A floodClass is a kind of output that a flood's finals must show: yes's
// lines; lines to render (colours, \r frames); random bytes, escaped.
type floodClass struct {
	name, cmd string
	// stopped: the command runs until the .k all; otherwise it ends by
	// itself.
	stopped bool
}

// floodClasses run two at once each, beside the yes floods.
var floodClasses = []floodClass{
	{name: "colour", cmd: `.a yes $'\e[31mred\e[0m \e[1mbold\e[0m \e[32mgreen\e[0m'`, stopped: true},
	{name: "cr", cmd: `.a yes $'progress 42%\r'`, stopped: true},
	{name: "binary", cmd: binaryOutput},
}

// isOutputFile tells whether m is the bot's output.txt of a long final.
func isOutputFile(m control.Message) bool {
	return m.Out && m.Media != nil && m.Media.Name == texts.OutputFileName
}

// flood runs n floods of class c at once in chat, stops them after floodFor
// (or lets them end), and reports the bot's memory.
func flood(t *testing.T, chat Chat, n int, c floodClass) {
	floodPool(t, n)
	name := fmt.Sprintf("chat_flood_%s_", c.name)
	bot := botCgroup(t)
	idle := bot.usage(t)
	peak := bot.watchPeak(t)

	cmds := sendAll(t, chat, n, c.cmd)
	// A flood left running would starve the cluster: stop what a failed
	// test leaves.
	t.Cleanup(func() { stopFloods(t, chat, cmds) })
	if c.stopped {
		poll(t, 5*time.Minute, fmt.Sprintf("%d floods running", n), func() (bool, string) {
			running := 0
			for _, j := range floodJobs(t, chat, cmds) {
				if j.Status.Phase == shellv1alpha1.PhaseRunning {
					running++
				}
			}
			return running == n, fmt.Sprintf("%d running", running)
		})
		time.Sleep(floodFor)
		chat.Answer(chat.Send(".k all"))
	}

	// A final is the preview edited into the final's end, and, as the
	// output is long, the output.txt under it; a long output that ended
	// before its preview has the output.txt alone, a reply to the command.
	finals := waitAll(t, chat, cmds, 10*time.Minute, func(cmd, m control.Message) bool {
		return IsFinalOf(cmd, m) || isOutputFile(m) && m.ReplyTo == cmd.ID
	})
	fileOf := map[int]int{} // the final's message, or the command's → the command's
	for id, fin := range finals {
		fileOf[fin.ID], fileOf[id] = id, id
	}
	files := map[int]bool{}
	deadline := time.Now().Add(2 * time.Minute)
	for len(files) < len(finals) && time.Now().Before(deadline) {
		for _, m := range messagesNow(chat) {
			if id, ok := fileOf[m.ReplyTo]; ok && isOutputFile(m) {
				files[id] = true
			}
		}
		time.Sleep(chatPoll)
	}
	peakBytes := peak()
	bot.sameContainer(t)

	lost := 0
	for _, cmd := range cmds {
		fin, ok := finals[cmd.ID]
		switch {
		case !ok:
			lost++
		case !files[cmd.ID]:
			lost++
			t.Errorf("the final of message %d came without its %s: %q", cmd.ID, texts.OutputFileName, tail(fin.Text, 200))
		case isOutputFile(fin):
			// The output.txt alone: no text to check.
		case c.stopped && !strings.HasSuffix(fin.Text, "\n"+texts.StoppedNote(130)):
			t.Errorf("the final of message %d does not end with the stop line: %q", cmd.ID, tail(fin.Text, 200))
		case strings.Contains(fin.Text, "⚠"):
			t.Errorf("the final of message %d has a warning: %q", cmd.ID, tail(fin.Text, 200))
		}
	}
	minKept := int64(-1)
	for _, j := range floodJobs(t, chat, cmds) {
		if kept := j.Status.OutputBytes - j.Status.DroppedBytes; minKept < 0 || kept < minKept {
			minKept = kept
		}
	}
	time.Sleep(floodSettle)
	after := bot.usage(t)

	mib := func(b int64) float64 { return float64(b) / (1 << 20) }
	report(name+"idle_mem", mib(idle), "MiB")
	report(name+"peak_mem", mib(peakBytes), "MiB")
	report(name+"after_mem", mib(after), "MiB")
	report(name+"finals_lost", float64(lost), "finals")
	report(name+"min_kept", mib(minKept), "MiB")
	if lost != 0 {
		t.Errorf("%d of %d floods lost their final", lost, n)
	}
	if after-idle >= floodBar {
		t.Errorf("%d flood(s) of %s: the bot's memory %.1f MiB a minute after the last final is %.1f MiB above its %.1f MiB at rest; the bar is under %d MiB",
			n, c.name, mib(after), mib(after-idle), mib(idle), floodBar>>20)
	}
	if peakBytes-idle >= floodBar {
		t.Errorf("%d flood(s) at once: the bot's peak %.1f MiB is %.1f MiB above its %.1f MiB at rest; the bar is under %d MiB",
			n, mib(peakBytes), mib(peakBytes-idle), mib(idle), floodBar>>20)
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// sendAll sends text n times at once in chat and returns the messages.
func sendAll(t *testing.T, chat Chat, n int, text string) []control.Message {
	t.Helper()
	cmds := make([]control.Message, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := chat.ctx(30 * time.Second)
			defer cancel()
			cmds[i], errs[i] = chat.api.Send(ctx, control.SendRequest{User: chat.User, Chat: chat.ID, Text: text})
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("send %q: %v", text, err)
		}
	}
	return cmds
}

// waitAll waits until each of cmds has a message that match says is its
// own, or until timeout, and returns what it found by command.
func waitAll(t *testing.T, chat Chat, cmds []control.Message, timeout time.Duration,
	match func(cmd, m control.Message) bool) map[int]control.Message {
	t.Helper()
	found := map[int]control.Message{}
	deadline := time.Now().Add(timeout)
	for len(found) < len(cmds) && time.Now().Before(deadline) {
		for _, m := range messagesNow(chat) {
			for _, cmd := range cmds {
				if _, ok := found[cmd.ID]; !ok && match(cmd, m) {
					found[cmd.ID] = m
				}
			}
		}
		time.Sleep(chatPoll)
	}
	return found
}

// messagesNow is Chat.Messages that gives none on an error, as the
// fake's port-forward can drop under load; the callers read again.
func messagesNow(chat Chat) []control.Message {
	ctx, cancel := chat.ctx(30 * time.Second)
	defer cancel()
	ms, err := chat.api.Messages(ctx, chat.ID)
	if err != nil {
		chat.t.Logf("the chat's messages: %v", err)
		return nil
	}
	return ms.Messages
}

// floodJobs are the ShellJobs of command messages cmds of chat.
func floodJobs(t *testing.T, chat Chat, cmds []control.Message) []shellv1alpha1.ShellJob {
	t.Helper()
	var list shellv1alpha1.ShellJobList
	if err := c.List(context.Background(), &list, client.InNamespace(Namespace)); err != nil {
		t.Fatal(err)
	}
	since := map[int64]time.Time{}
	for _, m := range cmds {
		// As in JobOf: a reset fake numbers its messages from 1 again.
		since[int64(m.ID)] = m.Date.Add(-2 * time.Second)
	}
	var out []shellv1alpha1.ShellJob
	for _, j := range list.Items {
		o := j.Spec.Origin
		if s, ok := since[o.Message]; ok && o.Source == shellv1alpha1.OriginTelegram && o.Chat == chat.ID && !j.CreationTimestamp.Time.Before(s) {
			out = append(out, j)
		}
	}
	return out
}

// stopFloods stops the jobs of cmds that are still running or queued, as
// .k does, without the bot.
func stopFloods(t *testing.T, chat Chat, cmds []control.Message) {
	for _, j := range floodJobs(t, chat, cmds) {
		if j.Spec.Stop || jobstate.IsFinished(&j) {
			continue
		}
		patch := client.MergeFrom(j.DeepCopy())
		j.Spec.Stop = true
		if err := c.Patch(context.Background(), &j, patch); err != nil {
			t.Logf("stop %s: %v", j.Name, err)
		}
	}
}

// floodPool gives the shell pool max(n, 16) workers, each asking for 10m
// of CPU and limited to floodCPU/n, and waits until they are all ready.
func floodPool(t *testing.T, n int) {
	t.Helper()
	replicas := max(n, ShellPoolSize)
	cpu := fmt.Sprintf("%dm", floodCPU/n)
	t.Logf("the shell pool: %d workers, each asking for 10m of CPU and limited to %s", replicas, cpu)
	run(t, "-n", Namespace, "patch", "shellpool", "shell", "--type=merge", "-p",
		fmt.Sprintf(`{"spec":{"replicas":%d,"resources":{"requests":{"cpu":"10m"},"limits":{"cpu":%q}}}}`, replicas, cpu))
	waitShellPool(t, replicas)
}

// restoreShellPool puts the shell pool's replicas and resources back as
// they are now when the test ends.
func restoreShellPool(t *testing.T) {
	t.Helper()
	var was struct {
		Spec struct {
			Replicas  int32           `json:"replicas"`
			Resources json.RawMessage `json:"resources"`
		} `json:"spec"`
	}
	if err := json.Unmarshal([]byte(run(t, "-n", Namespace, "get", "shellpool", "shell", "-o", "json")), &was); err != nil {
		t.Fatal(err)
	}
	restore, err := json.Marshal([]map[string]any{
		{"op": "replace", "path": "/spec/replicas", "value": was.Spec.Replicas},
		{"op": "replace", "path": "/spec/resources", "value": was.Spec.Resources},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		run(t, "-n", Namespace, "patch", "shellpool", "shell", "--type=json", "-p", string(restore))
		waitShellPool(t, int(was.Spec.Replicas))
	})
}

// waitShellPool waits until the shell pool is Available with n workers of
// its current revision ready and no old revision left.
func waitShellPool(t *testing.T, n int) {
	t.Helper()
	pool := &shellv1alpha1.ShellPool{}
	poll(t, 10*time.Minute, fmt.Sprintf("the shell pool available with %d workers", n), func() (bool, string) {
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: Namespace, Name: "shell"}, pool); err != nil {
			return false, err.Error()
		}
		return pool.Status.ObservedGeneration == pool.Generation &&
				meta.IsStatusConditionTrue(pool.Status.Conditions, shellv1alpha1.ShellPoolAvailable) &&
				pool.Status.ReadyReplicas == int32(n) && len(pool.Status.OldRevisions) == 0,
			fmt.Sprintf("ready %s, old revisions %v", pool.Status.Ready, pool.Status.OldRevisions)
	})
}

// memCgroup is a container's memory cgroup on its kind node: cgroup v1
// (memory.usage_in_bytes, memory.max_usage_in_bytes) or v2
// (memory.current).
type memCgroup struct {
	node, container, dir string
	v2                   bool
}

// botCgroup finds the memory cgroup of the bot's container (not its pod's,
// which counts the sandbox too) on its node.
func botCgroup(t *testing.T) memCgroup {
	t.Helper()
	return containerCgroup(t, Namespace, "app.kubernetes.io/component=bot", "bot")
}

// containerCgroup finds the memory cgroup of the container of the one
// running pod of ns that selector selects, on its node.
func containerCgroup(t *testing.T, ns, selector, container string) memCgroup {
	t.Helper()
	return cgroupOf(t, ns+" ("+selector+")", container, run(t, "-n", ns, "get", "pods", "-l", selector,
		"--field-selector=status.phase=Running", "-o",
		`jsonpath={range .items[*]}{.spec.nodeName} {range .status.containerStatuses[?(@.name=="`+container+`")]}{.containerID}{end}{"\n"}{end}`))
}

// podCgroup is containerCgroup of pod ns/name.
func podCgroup(t *testing.T, ns, name, container string) memCgroup {
	t.Helper()
	return cgroupOf(t, ns+"/"+name, container, run(t, "-n", ns, "get", "pod", name, "-o",
		`jsonpath={.spec.nodeName} {range .status.containerStatuses[?(@.name=="`+container+`")]}{.containerID}{end}`))
}

// cgroupOf finds the memory cgroup of container, on the node and with the
// container ID that pods, one "NODE ID" line, names.
func cgroupOf(t *testing.T, pods, container, out string) memCgroup {
	t.Helper()
	out = strings.TrimSpace(out)
	lines := strings.Split(out, "\n")
	node, id, ok := strings.Cut(lines[0], " ")
	if len(lines) != 1 || !ok || id == "" {
		t.Fatalf("want one running pod of %s with its container %s, have %q", pods, container, out)
	}
	_, id, _ = strings.Cut(id, "://")
	script := fmt.Sprintf(`for d in $(find /sys/fs/cgroup -type d -name '*%s*' 2>/dev/null); do
  if [ -f "$d/memory.max_usage_in_bytes" ]; then echo "v1 $d"; elif [ -f "$d/memory.current" ]; then echo "v2 $d"; fi
done`, id)
	b, err := dockerExec(node, "sh", "-c", script)
	if err != nil {
		t.Fatalf("the cgroup of %s on %s: %v\n%s", container, node, err, b)
	}
	kind, dir, ok := strings.Cut(strings.TrimSpace(b), " ")
	if !ok || strings.Contains(dir, "\n") {
		fs, _ := dockerExec(node, "stat", "-fc", "%T", "/sys/fs/cgroup")
		t.Fatalf("no single memory cgroup of the container %s on %s (%s at /sys/fs/cgroup): "+
			"want a directory with memory.max_usage_in_bytes (v1) or memory.current (v2), found %q",
			id, node, strings.TrimSpace(fs), b)
	}
	m := memCgroup{node: node, container: id, dir: dir, v2: kind == "v2"}
	t.Logf("the memory cgroup of %s (%s): %s:%s", container, kind, node, dir)
	return m
}

func (m memCgroup) read(t *testing.T, file string) int64 {
	t.Helper()
	b, err := dockerExec(m.node, "cat", m.dir+"/"+file)
	if err != nil {
		t.Fatalf("%s on %s: %v\n%s", file, m.node, err, b)
	}
	v, err := strconv.ParseInt(strings.TrimSpace(b), 10, 64)
	if err != nil {
		t.Fatalf("%s on %s: %q", file, m.node, b)
	}
	return v
}

// usage is the cgroup's memory now, page cache included.
func (m memCgroup) usage(t *testing.T) int64 {
	t.Helper()
	return m.read(t, m.file("memory.usage_in_bytes", "memory.current"))
}

// peakSinceStart is the cgroup's high-water mark since its container
// started, or since watchPeak last reset it (v1).
func (m memCgroup) peakSinceStart(t *testing.T) int64 {
	t.Helper()
	return m.read(t, m.file("memory.max_usage_in_bytes", "memory.peak"))
}

// file is the cgroup v1 or v2 name of a file.
func (m memCgroup) file(v1, v2 string) string {
	if m.v2 {
		return v2
	}
	return v1
}

// watchPeak starts measuring the cgroup's peak memory, and returns the
// function that stops and returns it. On v1 it resets the high-water mark
// memory.max_usage_in_bytes; v2's memory.peak cannot be reset for every
// reader, so a loop on the node samples memory.current every 100 ms (it
// ends by itself after an hour).
func (m memCgroup) watchPeak(t *testing.T) func() int64 {
	t.Helper()
	if !m.v2 {
		if b, err := dockerExec(m.node, "sh", "-c", fmt.Sprintf("echo 0 > %s/memory.max_usage_in_bytes", m.dir)); err != nil {
			t.Fatalf("reset memory.max_usage_in_bytes on %s: %v\n%s", m.node, err, b)
		}
		return func() int64 { return m.read(t, "memory.max_usage_in_bytes") }
	}
	stop := fmt.Sprintf("/tmp/shelljob-e2e-peak-%d", time.Now().UnixNano())
	cmd := exec.Command("docker", "exec", m.node, "sh", "-c", fmt.Sprintf(`max=0; end=$(($(date +%%s) + 3600))
while [ ! -e %[1]s ] && [ "$(date +%%s)" -lt "$end" ]; do
  v=$(cat %[2]s/memory.current) || break
  [ "$v" -gt "$max" ] && max=$v
  sleep 0.1
done
rm -f %[1]s; echo "$max"`, stop, m.dir))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var (
		once sync.Once
		peak int64
	)
	done := func() int64 {
		once.Do(func() {
			if b, err := dockerExec(m.node, "touch", stop); err != nil {
				t.Errorf("stop the memory sampler on %s: %v\n%s", m.node, err, b)
			}
			err := cmd.Wait()
			v, perr := strconv.ParseInt(strings.TrimSpace(out.String()), 10, 64)
			if err != nil || perr != nil {
				t.Errorf("the memory sampler on %s: %v %q", m.node, err, out.String())
			}
			peak = v
		})
		return peak
	}
	t.Cleanup(func() { done() })
	return done
}

// sameContainer fails the test if the bot's container is no longer the
// one measured: it restarted (out of memory, say) or was replaced.
func (m memCgroup) sameContainer(t *testing.T) {
	t.Helper()
	out := run(t, "-n", Namespace, "get", "pods", "-l", "app.kubernetes.io/component=bot", "-o",
		`jsonpath={range .items[*].status.containerStatuses[?(@.name=="bot")]}{.containerID} {.restartCount} {.lastState.terminated.reason}{"\n"}{end}`)
	if !strings.Contains(out, m.container) {
		t.Errorf("the bot's container %s is gone during the flood: %q", m.container, out)
	}
}
