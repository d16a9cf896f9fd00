//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"shelljob.dev/shelljob/bot/texts"
	"shelljob.dev/shelljob/internal/faketg/control"
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
	const samples = 15

	var reply, replyBase []time.Duration
	for range samples {
		reply = append(reply, replyLatency(t, p.Group))
		replyBase = append(replyBase, execWall(t, pod, "zsh", "-c", "true"))
	}
	report("chat_reply_p50", pct(reply, 50), "ms")
	report("chat_reply_p95", pct(reply, 95), "ms")
	report("chat_reply_base_p50", pct(replyBase, 50), "ms")

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
	run(t, append([]string{"-n", WorkerNamespace, "exec", pod, "-c", "agent", "--"}, command...)...)
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
	sem := make(chan struct{}, inflight)
	var wg sync.WaitGroup
	for i := range jobs {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			n := 1 + i%200
			m := p.Group.Send(fmt.Sprintf(".a echo soak %d; seq 1 %d", i, n))
			fin, ok := waitFinal(p.Group, m, 5*time.Minute)
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

// waitFinal is Chat.Final that reports a timeout instead of failing, so a
// soak counts what it lost.
func waitFinal(chat Chat, cmd control.Message, timeout time.Duration) (string, bool) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		ms, err := chat.api.Messages(ctx, chat.ID)
		cancel()
		if err == nil {
			for _, m := range ms.Messages {
				if IsFinalOf(cmd, m) {
					return m.Text, true
				}
			}
		}
		time.Sleep(time.Second)
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
