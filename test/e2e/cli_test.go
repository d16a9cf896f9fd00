//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

// The plugin is built once and found by kubectl on PATH, as a user has it:
// `kubectl shelljob ...`. kubectl's own flags go after the plugin's name,
// where the plugin reads them (kubectl stops looking for a plugin at the
// first flag).

var (
	pluginOnce sync.Once
	pluginDir  string
	pluginErr  error
)

// pluginPath returns a PATH with the built kubectl-shelljob first.
func pluginPath(t *testing.T) string {
	t.Helper()
	pluginOnce.Do(func() {
		pluginDir, pluginErr = os.MkdirTemp("", "shelljob-plugin-")
		if pluginErr != nil {
			return
		}
		out, err := exec.Command("go", "build", "-o", pluginDir, "../../cmd/kubectl-shelljob", "../../cmd/kubectl_complete-shelljob").CombinedOutput()
		if err != nil {
			pluginErr = fmt.Errorf("build the plugin: %v\n%s", err, out)
		}
	})
	if pluginErr != nil {
		t.Fatal(pluginErr)
	}
	return pluginDir + string(os.PathListSeparator) + os.Getenv("PATH")
}

// shelljobCmd is `kubectl shelljob ARGS` on the e2e cluster and namespace.
func shelljobCmd(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	full := []string{"shelljob"}
	for i := 1; i < len(kubectl); i++ { // --context CTX
		full = append(full, kubectl[i])
	}
	full = append(full, "-n", Namespace)
	cmd := exec.Command(kubectl[0], append(full, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+pluginPath(t))
	return cmd
}

type cliResult struct {
	out, errOut string
	code        int
	took        time.Duration
}

// shelljob runs `kubectl shelljob ARGS` with stdin.
func shelljob(t *testing.T, stdin string, args ...string) cliResult {
	t.Helper()
	cmd := shelljobCmd(t, args...)
	var out, errOut bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), &out, &errOut
	start := time.Now()
	err := cmd.Run()
	r := cliResult{out: out.String(), errOut: errOut.String(), took: time.Since(start)}
	if exit, ok := err.(*exec.ExitError); ok {
		r.code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("kubectl shelljob %s: %v", strings.Join(args, " "), err)
	}
	return r
}

var jobRef = regexp.MustCompile(`#(\d+)`)

func TestCLIExec(t *testing.T) {
	EnsurePool(t, EnsurePoolInput{Name: Pool, Replicas: PoolSize})
	if r := shelljob(t, "", "exec", "--pool", Pool, "--", "echo", "hi"); r.code != 0 || r.out != "hi\n" {
		t.Errorf("echo hi: exit %d, %q, %q", r.code, r.out, r.errOut)
	}
	if r := shelljob(t, "", "exec", "--pool", Pool, "--", "exit", "3"); r.code != 3 {
		t.Errorf("exit 3: exit %d, %q", r.code, r.errOut)
	}
	if r := shelljob(t, "echo piped; exit 5\n", "exec", "--pool", Pool); r.code != 5 || r.out != "piped\n" {
		t.Errorf("piped: exit %d, %q, %q", r.code, r.out, r.errOut)
	}
	if r := shelljob(t, strings.Repeat("#", 64<<10+1), "exec", "--pool", Pool); r.code != 1 || !strings.Contains(r.errOut, "over 64 KiB") {
		t.Errorf("too long: exit %d, %q", r.code, r.errOut)
	}
}

func TestCLIExecIdleTimeout(t *testing.T) {
	EnsurePool(t, EnsurePoolInput{Name: Pool, Replicas: PoolSize})
	r := shelljob(t, "", "exec", "--pool", Pool, "--timeout", "3s", "--", "echo start; sleep 60")
	if r.code != 124 || r.out != "start\n" || !strings.Contains(r.errOut, "no output for 3s") {
		t.Errorf("exit %d, %q, %q", r.code, r.out, r.errOut)
	}
}

// startExec starts `exec` in the background and waits until the job's
// output began, so that it runs.
func startExec(t *testing.T, command string) (*exec.Cmd, *utiltesting.SyncBuffer, *utiltesting.SyncBuffer) {
	t.Helper()
	cmd := shelljobCmd(t, "exec", "--pool", Pool, "--timeout", "0", "--", command)
	out, errOut := &utiltesting.SyncBuffer{}, &utiltesting.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	poll(t, JobTimeout, "the job's first output", func() (bool, string) {
		return strings.Contains(out.String(), "ready"), errOut.String()
	})
	return cmd, out, errOut
}

func TestCLIExecCtrlC(t *testing.T) {
	EnsurePool(t, EnsurePoolInput{Name: Pool, Replicas: PoolSize})
	t.Run("stop", func(t *testing.T) {
		cmd, _, errOut := startExec(t, "echo ready; sleep 100")
		_ = cmd.Process.Signal(os.Interrupt)
		err := cmd.Wait()
		exit, _ := err.(*exec.ExitError)
		if exit == nil || exit.ExitCode() != 130 || !strings.Contains(errOut.String(), "Stopping #") ||
			!strings.Contains(errOut.String(), "SIGINT sent") {
			t.Errorf("%v; stderr %q", err, errOut.String())
		}
	})
	t.Run("detach", func(t *testing.T) {
		cmd, _, errOut := startExec(t, "trap '' INT TERM; echo ready; sleep 100")
		_ = cmd.Process.Signal(os.Interrupt)
		poll(t, JobTimeout, "the SIGINT step", func() (bool, string) {
			return strings.Contains(errOut.String(), "SIGINT sent"), errOut.String()
		})
		_ = cmd.Process.Signal(os.Interrupt)
		err := cmd.Wait()
		exit, _ := err.(*exec.ExitError)
		if exit == nil || exit.ExitCode() != 130 || !strings.Contains(errOut.String(), "Detached from #") ||
			!strings.Contains(errOut.String(), "kubectl shelljob logs -f cli-") {
			t.Errorf("%v; stderr %q", err, errOut.String())
		}
		// The job goes on to its SIGKILL without the CLI.
		m := jobRef.FindStringSubmatch(errOut.String())
		poll(t, JobTimeout, "the detached job's end", func() (bool, string) {
			r := shelljob(t, "", "ls", "--all")
			for _, line := range strings.Split(r.out, "\n") {
				if f := strings.Fields(line); len(f) > 3 && f[0] == m[1] {
					return f[3] == string(shellv1alpha1.PhaseStopped), line
				}
			}
			return false, r.out
		})
	})
}

func TestCLIExecFiles(t *testing.T) {
	EnsurePool(t, EnsurePoolInput{Name: Pool, Replicas: PoolSize})
	dir := t.TempDir()
	// A 1×1 PNG: on a pipe it is saved, never drawn.
	png := `printf '\x89PNG\r\n\x1a\n' > "$SHELLJOB_OUT/dot.png"; echo data > "$SHELLJOB_OUT/a.txt"; echo done`
	r := shelljob(t, "", "exec", "--pool", Pool, "--output-dir", dir, "--", png)
	if r.code != 0 || r.out != "done\n" || strings.Contains(r.out, "\x1b") {
		t.Fatalf("exit %d, %q, %q", r.code, r.out, r.errOut)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "a.txt")); err != nil || string(b) != "data\n" {
		t.Errorf("a.txt: %q, %v", b, err)
	}
	for _, f := range []string{"a.txt", "dot.png"} {
		if !strings.Contains(r.errOut, filepath.Join(dir, f)) {
			t.Errorf("%s not named: %q", f, r.errOut)
		}
	}
}

// TestCLIExecMarksDelivered: exec marks its job delivered once its output
// and files are in, so that a restart of the pool lets the worker that
// ran it go at once, not after the operator's 10-minute delivery grace.
func TestCLIExecMarksDelivered(t *testing.T) {
	const pool = "e2e-cli-delivered"
	old := EnsurePool(t, EnsurePoolInput{Name: pool, Replicas: 1}).Status.Revision
	marker := "delivered-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	r := shelljob(t, "", "exec", "--pool", pool, "--output-dir", t.TempDir(), "--", `echo `+marker+` > "$SHELLJOB_OUT/a.txt"; echo `+marker)
	if r.code != 0 || r.out != marker+"\n" || strings.Contains(r.errOut, "warning") {
		t.Fatalf("exit %d, %q, %q", r.code, r.out, r.errOut)
	}
	// exec ends with the output's end, which tells the exit: the status
	// may say it a moment later.
	var job *shellv1alpha1.ShellJob
	poll(t, 30*time.Second, "the job of the command, ended", func() (bool, string) {
		var jobs shellv1alpha1.ShellJobList
		if err := c.List(context.Background(), &jobs, client.InNamespace(Namespace)); err != nil {
			return false, err.Error()
		}
		for i := range jobs.Items {
			if strings.Contains(jobs.Items[i].Spec.Command, marker) {
				job = &jobs.Items[i]
				return job.Status.CompletionTime != nil, fmt.Sprintf("%+v", job.Status)
			}
		}
		return false, "no job of the command"
	})
	if v, ok := job.Annotations[shellv1alpha1.AnnotationDelivered]; !ok {
		t.Errorf("job %s not marked delivered: %v", job.Name, job.Annotations)
	} else if at, err := time.Parse(time.RFC3339, v); err != nil || at.Before(job.Status.CompletionTime.Add(-time.Second)) {
		t.Errorf("job %s marked delivered at %q (%v), before its end %v", job.Name, v, err, job.Status.CompletionTime)
	}

	p := &shellv1alpha1.ShellPool{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: Namespace, Name: pool}, p); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(p.DeepCopy())
	p.Spec.RestartedAt = now()
	if err := c.Patch(context.Background(), p, patch); err != nil {
		t.Fatal(err)
	}
	poll(t, JobTimeout, "the old worker deleted", func() (bool, string) {
		pods := workerPods(t, pool, old)
		return len(pods) == 0, fmt.Sprintf("%d old pods", len(pods))
	})
	WaitForPoolAvailable(t, pool)
}

// TestCLIConsolePiped: a piped console, opened by a user who may not exec
// into the workers, runs its input in a Console job of that user's, as a
// user of the worker other than root, and closes itself after the exit
// it sends.
func TestCLIConsolePiped(t *testing.T) {
	EnsurePool(t, EnsurePoolInput{Name: Pool, Replicas: PoolSize})
	user := shelljobUser(t)
	r := shelljob(t, "echo HELLO\nid -u\n", "--as", user, "console", "--pool", Pool)
	// The terminal echoes the input too: HELLO alone on a line is the
	// command's output, and so is the user id.
	uid := regexp.MustCompile(`(?m)^(\d+)\r?$`).FindStringSubmatch(r.out)
	if !regexp.MustCompile(`(?m)^HELLO\r?$`).MatchString(r.out) || uid == nil || uid[1] == "0" || r.took > 2*time.Second {
		t.Errorf("exit %d after %v, %q, %q", r.code, r.took, r.out, r.errOut)
	}
	var list shellv1alpha1.ShellJobList
	if err := c.List(context.Background(), &list, client.InNamespace(Namespace)); err != nil {
		t.Fatal(err)
	}
	var consoles []shellv1alpha1.ShellJob
	for _, j := range list.Items {
		if j.Spec.Mode == shellv1alpha1.ModeConsole && j.Spec.Origin.User == user {
			consoles = append(consoles, j)
		}
	}
	if len(consoles) != 1 || consoles[0].Status.Number == 0 || consoles[0].Annotations[shellv1alpha1.AnnotationDelivered] == "" {
		t.Errorf("console jobs of %s: %+v; want one, numbered and delivered", user, consoles)
	}
}

// TestCLIConsoleCutHangsUp: a console whose plugin dies (its session cut
// with no goodbye) is hung up, as a closed ssh session is: its job ends
// of the hangup, and its worker is free again.
func TestCLIConsoleCutHangsUp(t *testing.T) {
	EnsurePool(t, EnsurePoolInput{Name: Pool, Replicas: PoolSize})
	user := shelljobUser(t)
	cmd := shelljobCmd(t, "--as", user, "console", "--pool", Pool)
	in, err := cmd.StdinPipe() // held open: the console sends no exit
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out := &utiltesting.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(in, "echo ATTACHED\n"); err != nil {
		t.Fatal(err)
	}
	poll(t, JobTimeout, "the console's output", func() (bool, string) {
		return regexp.MustCompile(`(?m)^ATTACHED\r?$`).MatchString(out.String()), out.String()
	})
	var console *shellv1alpha1.ShellJob
	var list shellv1alpha1.ShellJobList
	if err := c.List(context.Background(), &list, client.InNamespace(Namespace)); err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		if list.Items[i].Spec.Origin.User == user && list.Items[i].Spec.Mode == shellv1alpha1.ModeConsole {
			console = &list.Items[i]
		}
	}
	if console == nil {
		t.Fatalf("no console job of %s", user)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	ended := WaitForJobEnd(t, console, JobTimeout)
	// zsh exits with 1 (SIGHUP's number) when hung up; a shell that dies
	// of it reports 129.
	if code := ExitCode(ended); code != 1 && code != 129 || len(ended.Status.StopSteps) > 0 {
		t.Errorf("the cut console ended with %d, stop steps %v; want the status of a hangup, and no stop", code, ended.Status.StopSteps)
	}
}

// shelljobUser is a user of the suite's namespace bound to the chart's
// shelljob-user alone: it may run, read and stop its own ShellJobs and
// attach to their consoles through the aggregated API, and nothing else:
// no pods/exec on the workers. Its jobs go at the end of the test.
func shelljobUser(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	user := fmt.Sprintf("e2e-console-%d", time.Now().UnixNano())
	shelljobUsers(t, user)
	t.Cleanup(func() {
		var list shellv1alpha1.ShellJobList
		if err := c.List(ctx, &list, client.InNamespace(Namespace)); err == nil {
			for i := range list.Items {
				if list.Items[i].Spec.Origin.User == user {
					_ = c.Delete(ctx, &list.Items[i])
				}
			}
		}
	})
	for _, ns := range []string{Namespace, WorkerNamespace} {
		out, _ := kubectlCmd("auth", "can-i", "create", "pods", "--subresource=exec", "-n", ns, "--as", user).Output()
		if strings.TrimSpace(string(out)) != "no" {
			t.Fatalf("%s may exec into the pods of %s (%q): the console must need no such right", user, ns, out)
		}
	}
	return user
}

// TestCLIReplState: a repl's shell keeps its state from one command to the
// next, for a user bound to the chart's shelljob-user alone.
func TestCLIReplState(t *testing.T) {
	EnsurePool(t, EnsurePoolInput{Name: Pool, Replicas: PoolSize})
	user := shelljobUser(t)
	if r := shelljob(t, "cd /tmp\nexport E2E_REPL=kept\n", "--as", user, "repl", "--pool", Pool); r.code != 0 {
		t.Fatalf("first: exit %d, %q", r.code, r.errOut)
	}
	if r := shelljob(t, "pwd; echo $E2E_REPL\n", "--as", user, "repl", "--pool", Pool); r.code != 0 || r.out != "/tmp\nkept\n" {
		t.Errorf("second: exit %d, %q, %q", r.code, r.out, r.errOut)
	}
}

// TestCLILogsFollowCut: logs -f goes on from where it was after its stream
// is cut (the agent's follow in the pod is killed).
func TestCLILogsFollowCut(t *testing.T) {
	EnsurePool(t, EnsurePoolInput{Name: Pool, Replicas: PoolSize})
	j := Create(t, Job(t, "logs", "for i in $(seq 1 8); do echo line$i; sleep 1; done"))[0]
	j = WaitForJobPhase(t, j, JobTimeout, shellv1alpha1.PhaseRunning)
	cmd := shelljobCmd(t, "logs", "-f", j.Name)
	out := &utiltesting.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	poll(t, JobTimeout, "line2", func() (bool, string) { return strings.Contains(out.String(), "line2"), out.String() })
	run(t, "-n", WorkerNamespace, "exec", j.Status.Pod, "-c", agentapi.WorkerContainer, "--", "zsh", "-c",
		`for p in /proc/[0-9]*; do [[ ${p#/proc/} != $$ && "$(tr '\0' ' ' < $p/cmdline 2>/dev/null)" == *" follow "*--job=`+string(j.UID)+`* ]] && kill ${p#/proc/}; done; true`)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("logs -f: %v\n%s", err, out.String())
	}
	var want strings.Builder
	for i := 1; i <= 8; i++ {
		fmt.Fprintf(&want, "line%d\n", i)
	}
	if out.String() != want.String() {
		t.Errorf("output %q, want %q", out.String(), want.String())
	}
}

func TestCLILsStopPools(t *testing.T) {
	EnsurePool(t, EnsurePoolInput{Name: Pool, Replicas: PoolSize})
	j := WaitForJobPhase(t, Create(t, Job(t, "ls", "sleep 100"))[0], JobTimeout, shellv1alpha1.PhaseRunning)
	n := strconv.FormatInt(j.Status.Number, 10)
	if r := shelljob(t, "", "ls"); r.code != 0 || !strings.Contains(r.out, j.Name) || !strings.Contains(r.out, "sleep 100") {
		t.Errorf("ls: exit %d\n%s%s", r.code, r.out, r.errOut)
	}
	if r := shelljob(t, "", "pools"); r.code != 0 || !regexp.MustCompile(`(?m)^`+Pool+`\s+\d+/\d+\s+\d+\s+\d+`).MatchString(r.out) {
		t.Errorf("pools: exit %d\n%s%s", r.code, r.out, r.errOut)
	}
	if r := shelljob(t, "", "stop", n); r.out != "⏹ Stopping #"+n+"…\n" {
		t.Errorf("stop: exit %d, %q, %q", r.code, r.out, r.errOut)
	}
	WaitForJobEnd(t, j, JobTimeout)
	if r := shelljob(t, "", "stop", j.Name); r.out != "#"+n+" has already ended.\n" {
		t.Errorf("stop again: %q", r.out)
	}
}

// TestCLIConsoleTmux drives the console in a real terminal, as a user who
// may not exec into the workers: top is drawn at the new size after the
// window is resized.
func TestCLIConsoleTmux(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("CI") == "" {
			t.Skip("no tmux")
		}
		t.Fatal("CI needs tmux")
	}
	EnsurePool(t, EnsurePoolInput{Name: Pool, Replicas: PoolSize})
	session := fmt.Sprintf("shelljob-e2e-%d", os.Getpid())
	argv := shelljobCmd(t, "--as", shelljobUser(t), "console", "--pool", Pool).Args
	tmux := func(args ...string) string {
		out, err := exec.Command("tmux", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	shellLine := "env PATH=" + shQuote(pluginPath(t)) + " TERM=xterm-256color"
	for _, a := range argv {
		shellLine += " " + shQuote(a)
	}
	// No pipe for the tmux server to inherit: the output of a command that
	// starts it would never end.
	if err := exec.Command("tmux", "new-session", "-d", "-s", session, "-x", "100", "-y", "30", shellLine).Run(); err != nil {
		t.Fatalf("tmux new-session: %v", err)
	}
	t.Cleanup(func() { _ = exec.Command("tmux", "kill-session", "-t", session).Run() })
	screen := func() string { return tmux("capture-pane", "-p", "-t", session) }
	begin := time.Now()
	step := func(what string, cond func() (bool, string)) {
		t.Helper()
		poll(t, JobTimeout, what, cond)
		t.Logf("%s: %.1f s", what, time.Since(begin).Seconds())
	}
	var prompt string
	step("a prompt", func() (bool, string) { s := screen(); prompt = lastLine(s); return prompt != "", s })
	tmux("send-keys", "-t", session, "top", "Enter")
	step("top", func() (bool, string) { s := screen(); return strings.Contains(s, "PID"), s })
	tmux("resize-window", "-t", session, "-x", "140", "-y", "40")
	step("top redrawn at 140×40", func() (bool, string) {
		s := screen()
		// One clean frame; the remote size shows once top has quit.
		return strings.Count(s, "top - ") == 1 && strings.Count(s, "PID") == 1, s
	})
	tmux("send-keys", "-t", session, "q")
	// top flushes pending input as it restores the terminal: type only once
	// the shell prompts again.
	step("the prompt after top", func() (bool, string) { s := screen(); return lastLine(s) == prompt, s })
	tmux("send-keys", "-t", session, "clear; stty size", "Enter")
	step("the remote size", func() (bool, string) { s := screen(); return strings.Contains(s, "40 140"), s })
}

// lastLine is the last line of a screen that is not blank, trimmed.
func lastLine(screen string) string {
	lines := strings.Split(strings.TrimRight(screen, " \n"), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// TestBenchCLI measures `kubectl shelljob exec -- echo hi` beside
// `kubectl exec POD -- echo hi`, each a whole process from start to exit,
// E2E_BENCH_CLI_RUNS runs each (default 30), interleaved. It prints
// "BENCH name value unit" lines for hack/bench.sh (section cli) and
// asserts nothing about speed; it runs only with E2E_BENCH=1.
func TestBenchCLI(t *testing.T) {
	if os.Getenv("E2E_BENCH") == "" {
		t.Skip("E2E_BENCH is not set: hack/bench.sh cli runs this")
	}
	runs := 30
	if n, err := strconv.Atoi(os.Getenv("E2E_BENCH_CLI_RUNS")); err == nil && n > 0 {
		runs = n
	}
	pool := EnsurePool(t, EnsurePoolInput{Name: Pool, Replicas: PoolSize})
	pod := workerPods(t, Pool, pool.Status.Revision)[0].Name
	timed := func(cmd *exec.Cmd) time.Duration {
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		start := time.Now()
		if err := cmd.Run(); err != nil || !strings.Contains(out.String(), "hi") {
			t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out.String())
		}
		return time.Since(start)
	}
	_ = pluginPath(t)
	// ours keeps kubectl's cache directory, as a user's does; fresh starts
	// each run with an empty one. The plugin reads none: fresh is an exec
	// right after another, while the operator still ends ours.
	cache := t.TempDir()
	var ours, fresh, base []time.Duration
	for range runs {
		ours = append(ours, timed(shelljobCmd(t, "--cache-dir", cache, "exec", "--pool", Pool, "--", "echo", "hi")))
		fresh = append(fresh, timed(shelljobCmd(t, "--cache-dir", t.TempDir(), "exec", "--pool", Pool, "--", "echo", "hi")))
		base = append(base, timed(kubectlCmd("-n", WorkerNamespace, "exec", pod, "-c", agentapi.WorkerContainer, "--", "echo", "hi")))
	}
	report("cli_exec_p50", pct(ours, 50), "ms")
	report("cli_exec_p95", pct(ours, 95), "ms")
	report("cli_exec_fresh_p50", pct(fresh, 50), "ms")
	report("cli_exec_fresh_p95", pct(fresh, 95), "ms")
	report("cli_exec_base_p50", pct(base, 50), "ms")
	report("cli_exec_base_p95", pct(base, 95), "ms")
}
