package agent_test

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"shelljob.dev/shelljob/agent"
	"shelljob.dev/shelljob/agent/agenttest"
	"shelljob.dev/shelljob/internal/agentapi"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

// podCapabilities runs a command as the worker pod runs the agent: with
// agent.RequiredCapabilities alone, and no new privileges.
func podCapabilities() []string {
	caps := "-all"
	for _, c := range agent.RequiredCapabilities {
		caps += ",+" + strings.ToLower(c)
	}
	return []string{"setpriv", "--bounding-set", caps, "--inh-caps", "-all", "--no-new-privs", "--"}
}

// isolated starts a daemon that isolates jobs, with the worker pod's
// capabilities, and a copy of the agent's command line that every user may
// run; the test is skipped where the agent could not isolate (not root).
func isolated(t *testing.T, extra ...string) (d *daemon, agentBin string) {
	t.Helper()
	if why := agent.IsolationImpossible(); why != "" {
		t.Skipf("jobs cannot be isolated here: %s", why)
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Fatal("these tests limit the agent's capabilities with setpriv: apt-get install -y util-linux")
	}
	d = &daemon{t: t, dir: agenttest.TempDir(t), home: agenttest.TempDir(t), logs: &utiltesting.SyncBuffer{}, wrap: podCapabilities()}
	d.args = append([]string{"serve", "--spool-dir", d.dir, agenttest.ForkUIDs(), "--home", d.home, "-v", "2", "--isolation=required"}, extra...)
	d.c = agent.NewClient(agent.SocketPath(d.dir))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent log:\n%s", d.logs.String())
		}
	})
	d.run()
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	agentBin = filepath.Join(agenttest.TempDir(t), "shelljob-agent")
	if err := os.WriteFile(agentBin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	return d, agentBin
}

// probeScript tries to reach job victim (running as group pgid) and the
// agent from a command, and prints a line "NAME: reached" or "NAME:
// denied" for each try. The commands inherit the agent's environment, so
// agentBin runs as shelljob-agent.
func probeScript(spool, agentBin, home, victim string, pgid int) string {
	job := filepath.Join(spool, "jobs", victim)
	return fmt.Sprintf(`try() { local n=$1; shift; if eval "$*" >/dev/null 2>&1; then print "$n: reached"; else print "$n: denied"; fi; }
try list-jobs 'ls %[1]s/jobs'
try read-output 'ls %[2]s/output'
try read-command 'cat %[2]s/command'
try read-files 'ls %[2]s/files'
try read-secret 'cat %[2]s/files/secret'
try plant-file 'print planted > %[2]s/files/planted'
try read-home 'ls %[2]s/home'
try read-shell-home 'ls %[5]s'
try signal-group 'kill -0 -- -%[4]d'
try read-environ 'cat /proc/%[4]d/environ'
try agent-signal '%[3]s signal --spool-dir %[1]s --job %[6]s --signal KILL'
%[3]s signal --spool-dir %[1]s --job %[6]s --signal KILL 2>&1 | grep -q 'permission denied' && print agent-signal: permission denied
try own-files 'print mine > $SHELLJOB_OUT/mine && cat $SHELLJOB_OUT/mine'
print uid=$(id -u) gid=$(id -g) groups=$(id -G)`, spool, job, agentBin, pgid, home, victim)
}

// wantDenied is the output of probeScript from a job of user uid that
// reaches nothing of its victim's.
func wantDenied(uid int) string {
	var b strings.Builder
	for _, n := range []string{"list-jobs", "read-output", "read-command", "read-files", "read-secret", "plant-file", "read-home",
		"read-shell-home", "signal-group", "read-environ", "agent-signal"} {
		b.WriteString(n + ": denied\n")
	}
	id := strconv.Itoa(uid)
	b.WriteString("agent-signal: permission denied\nown-files: reached\nuid=" + id + " gid=" + id + " groups=" + id + "\n")
	return b.String()
}

// filesOf collects job's files: name to content.
func (d *daemon) filesOf(id string) map[string]string {
	d.t.Helper()
	var out bytes.Buffer
	if err := d.c.GetFiles(ctxFor(d.t, waitShort), id, 0, &out); err != nil {
		d.t.Fatalf("get files of %s: %v", id, err)
	}
	got := map[string]string{}
	tr := tar.NewReader(&out)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return got
		}
		if err != nil {
			d.t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		got[h.Name] = string(b)
	}
}

// TestJobsIsolated: a Fork job and a Stateful job can neither read, signal
// nor write into another job, running or ended, nor reach the agent; each
// runs as a user of its own, and a job's own files still come back; with
// namespaces of their own or without.
func TestJobsIsolated(t *testing.T) {
	for _, mode := range sandboxModes {
		t.Run(mode.name, func(t *testing.T) { jobsIsolated(t, mode.flags...) })
	}
}

func jobsIsolated(t *testing.T, flags ...string) {
	d, bin := isolated(t, flags...)
	secret := `print secret-output; print secret-file > "$SHELLJOB_OUT/secret"`
	d.start("ended", secret, false)
	if got := d.output("ended"); got != "secret-output\n" {
		t.Fatalf("output of ended: %q", got)
	}
	d.start("stateful-ended", "STATE=kept; cd /tmp; "+secret, true)
	if got := d.output("stateful-ended"); got != "secret-output\n" {
		t.Fatalf("output of stateful-ended: %q", got)
	}
	running := d.start("running", secret+"; print ready; sleep 100", false)
	d.waitOutput("running", "ready")
	waitProc(t, running.PGID, "sleep")

	forkUID := func(id string) int {
		t.Helper()
		var rec struct{ UID int }
		b, err := os.ReadFile(filepath.Join(d.dir, "jobs", id, "job.json"))
		if err == nil {
			err = json.Unmarshal(b, &rec)
		}
		if err != nil || rec.UID < agent.ForkUIDBase {
			t.Fatalf("user of %s: %+v %v", id, rec, err)
		}
		return rec.UID
	}
	// The shell is the stateful jobs' own, and tries a victim that is not.
	for _, tc := range []struct {
		prober, victim string
		stateful       bool
	}{
		{"fork-on-running", "running", false},
		{"fork-on-ended", "ended", false},
		{"fork-on-stateful", "stateful-ended", false},
		{"stateful-on-running", "running", true},
		{"stateful-on-ended", "ended", true},
	} {
		pgid := running.PGID
		if tc.victim != "running" {
			pgid = syscall.Getpgrp() // the test's and the agent's group, which no job may signal
		}
		d.start(tc.prober, probeScript(d.dir, bin, d.home, tc.victim, pgid), tc.stateful)
		got := d.output(tc.prober)
		uid := agent.StatefulUID
		if !tc.stateful {
			uid = forkUID(tc.prober)
		}
		want := wantDenied(uid)
		if tc.stateful {
			// The shell's home is the stateful jobs' own.
			want = strings.Replace(want, "read-shell-home: denied", "read-shell-home: reached", 1)
		}
		if got != want {
			t.Errorf("%s, probing %s:\n%s\nwant\n%s", tc.prober, tc.victim, got, want)
		}
	}
	if a, b := forkUID("running"), forkUID("ended"); a == b {
		t.Errorf("two Fork jobs ran as user %d", a)
	}

	d.start("stateful-after", `print -r -- "$STATE $PWD $(id -u)"`, true)
	if got, want := d.output("stateful-after"), fmt.Sprintf("kept /tmp %d\n", agent.StatefulUID); got != want {
		t.Errorf("the persistent shell kept %q, want %q", got, want)
	}

	d.stillRunning("running", 500*time.Millisecond)
	d.signal("running", agentapi.SIGKILL)
	d.exited("running")
	for _, id := range []string{"running", "ended", "stateful-ended"} {
		if got := d.filesOf(id); len(got) != 1 || got["secret"] != "secret-file\n" {
			t.Errorf("files of %s: %q, want its secret alone", id, got)
		}
	}
	if got := d.output("running"); got != "secret-output\nready\n" {
		t.Errorf("output of running: %q", got)
	}
}

// TestJobFilesTakenBack: once a job has ended, its files are the agent's:
// a process it left behind can no longer change them, and what the job
// closed to itself (mode 000) is collected all the same, by an agent with
// the worker pod's capabilities alone.
func TestJobFilesTakenBack(t *testing.T) {
	d, _ := isolated(t)
	d.start("closed", `cd "$SHELLJOB_OUT" && mkdir -p d/e && print deep > d/e/f && print top > top && `+
		`chmod 000 d/e/f d/e d top && `+
		`setsid zsh -c 'while sleep 0.05; do print late >> "$SHELLJOB_OUT/top.late" || { print $$ > /dev/null; exit; }; done' `+
		`</dev/null >/dev/null 2>&1 &; print $! > "$SHELLJOB_OUT/pid"; chmod 000 pid`, false)
	d.exited("closed")
	got := d.filesOf("closed")
	time.Sleep(300 * time.Millisecond) // the leftover's next tries
	again := d.filesOf("closed")
	if got["top.late"] != again["top.late"] {
		t.Errorf("a process the job left wrote into its files after it ended: %q, then %q", got["top.late"], again["top.late"])
	}
	if got["d/e/f"] != "deep\n" || got["top"] != "top\n" {
		t.Errorf("files %q, want d/e/f and top", got)
	}
}

// uidOf is the user job id ran as.
func (d *daemon) uidOf(id string) int {
	d.t.Helper()
	var rec struct{ UID int }
	b, err := os.ReadFile(filepath.Join(d.dir, "jobs", id, "job.json"))
	if err == nil {
		err = json.Unmarshal(b, &rec)
	}
	if err != nil || rec.UID == 0 {
		d.t.Fatalf("user of %s: %+v %v", id, rec, err)
	}
	return rec.UID
}

// userProcesses lists the live processes of uid.
func userProcesses(uid int) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		fi, err := os.Stat("/proc/" + e.Name())
		if err != nil || int(fi.Sys().(*syscall.Stat_t).Uid) != uid {
			continue
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/stat"); err == nil && !strings.Contains(string(b[strings.LastIndexByte(string(b), ')')+1:]), " Z ") {
			out = append(out, e.Name())
		}
	}
	return out
}

// sandboxModes are the agent's two ways of isolating jobs: namespaces of
// their own, and users alone in the pod's namespaces.
var sandboxModes = []struct {
	name  string
	flags []string
}{{"namespaces", nil}, {"users-only", []string{"--namespaces=off"}}}

// TestNothingLeftBehind: once a Fork job has ended, no process of its user
// is left (a setsid loop included), and nothing it wrote in /tmp, /var/tmp
// or /dev/shm, however deep and however closed; a later job sees nothing
// of it, in both ways of isolating jobs.
func TestNothingLeftBehind(t *testing.T) {
	for _, mode := range sandboxModes {
		t.Run(mode.name, func(t *testing.T) {
			d, _ := isolated(t, mode.flags...)
			tag := fmt.Sprintf("shelljob-left-%d-%s", os.Getpid(), mode.name)
			paths := []string{"/tmp/" + tag, "/var/tmp/" + tag, "/dev/shm/" + tag, "/tmp/" + tag + ".d"}
			t.Cleanup(func() {
				for _, p := range paths {
					_ = os.RemoveAll(p)
				}
			})
			d.start("leaver", fmt.Sprintf(`setsid zsh -c 'while sleep 0.1; do :; done' </dev/null >/dev/null 2>&1 &
for p in /tmp/%[1]s /var/tmp/%[1]s /dev/shm/%[1]s; do print left > $p; done
mkdir -p /tmp/%[1]s.d/deep && print left > /tmp/%[1]s.d/deep/f && chmod 000 /tmp/%[1]s.d/deep /tmp/%[1]s.d
print started`, tag), false)
			if got := d.output("leaver"); got != "started\n" {
				t.Fatalf("output %q", got)
			}
			d.exited("leaver")
			uid := d.uidOf("leaver")
			if left := userProcesses(uid); len(left) > 0 {
				t.Errorf("processes %v of the ended job's user %d are left", left, uid)
			}
			for _, p := range paths {
				if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("%s is left after the job ended (%v)", p, err)
				}
			}
			d.start("later", fmt.Sprintf(`n=0; for p in /proc/<->(N); do [[ $(stat -c %%u $p 2>/dev/null) == %d ]] && ((n++)); done; print $n`, uid), false)
			if got := d.output("later"); got != "0\n" {
				t.Errorf("a later job counts %q processes of the ended job's user, want 0", got)
			}
		})
	}
}

// TestCommandNotInArgv: no process of a running job holds its command in
// its command line, which every process may read in /proc.
func TestCommandNotInArgv(t *testing.T) {
	for _, mode := range sandboxModes {
		t.Run(mode.name, func(t *testing.T) {
			d, _ := isolated(t, mode.flags...)
			secret := fmt.Sprintf("Bearer-%d-%s", os.Getpid(), mode.name)
			// The trailing : keeps the shell from exec-ing its last command.
			r := d.start("holder", ": "+secret+"; print ready; sleep 100; :", false)
			d.waitOutput("holder", "ready")
			waitProc(t, r.PGID, "sleep")
			ents, _ := os.ReadDir("/proc")
			for _, e := range ents {
				if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && strings.Contains(string(b), secret) {
					t.Errorf("process %s holds the command in its command line: %q", e.Name(), b)
				}
			}
			d.signal("holder", agentapi.SIGKILL)
			d.exited("holder")
		})
	}
}

// TestJobsSeeNoOtherJob: a Fork job, a Direct one beside it (the agent
// runs both as Fork) and the Stateful shell see no process but their own:
// none of another job's command lines, as a job would read them.
func TestJobsSeeNoOtherJob(t *testing.T) {
	d, _ := isolated(t)
	if e, err := d.waitEvent(waitShort, func(e agentapi.Event) bool { return e.Type == agentapi.EventWorker }); err != nil ||
		e.Worker.Isolation != agentapi.IsolationNamespaces {
		t.Skipf("jobs cannot have namespaces of their own here: %+v %v", e.Worker, err)
	}
	marker := fmt.Sprintf("Bearer-%d", os.Getpid())
	// A process whose command line holds the marker, as a token in argv.
	victim := d.start("victim", "zsh -c 'sleep 100; :' "+marker, false)
	waitProc(t, victim.PGID, "sleep")
	d.start("stateful-victim", "print ok", true)
	d.output("stateful-victim")
	// The marker is built at run time, so that the probe's own command line
	// does not hold it; it reads with zsh's builtins alone.
	probe := fmt.Sprintf(`m=%q; m+=%q; n=0; pids=(/proc/<->(N))
for p in $pids; do [[ "$(<$p/cmdline)" == *$m* ]] && ((n++)); done 2>/dev/null
print seen=$n pids=${#pids}`, marker[:4], marker[4:])
	for _, tc := range []struct {
		name     string
		stateful bool
		want     string
	}{
		// init and the shell.
		{"beside", false, "seen=0 pids=2\n"},
		// init and the persistent shell.
		{"stateful", true, "seen=0 pids=2\n"},
	} {
		d.start(tc.name, probe, tc.stateful)
		if got := d.output(tc.name); got != tc.want {
			t.Errorf("%s job: %q, want %q", tc.name, got, tc.want)
		}
	}
	d.signal("victim", agentapi.SIGKILL)
	d.exited("victim")
}

// TestJobsHoldNoCapabilities: a job's shell holds no capability, ambient
// ones included, whichever way jobs are isolated: the init of its
// namespaces dropped the one it mounted /proc with.
func TestJobsHoldNoCapabilities(t *testing.T) {
	for _, mode := range sandboxModes {
		t.Run(mode.name, func(t *testing.T) {
			d, _ := isolated(t, mode.flags...)
			for _, stateful := range []bool{false, true} {
				id := fmt.Sprintf("caps-%v", stateful)
				d.start(id, `grep -E '^Cap(Inh|Prm|Eff|Amb)' /proc/self/status | tr -s '\t' ' '`, stateful)
				want := "CapInh: 0000000000000000\nCapPrm: 0000000000000000\nCapEff: 0000000000000000\nCapAmb: 0000000000000000\n"
				if got := d.output(id); got != want {
					t.Errorf("stateful %v: %q, want %q", stateful, got, want)
				}
			}
		})
	}
}

// TestForkJobOnInitMadeAhead: with namespaces, a Fork job starts on an
// init the agent made ahead of it, as its own user, with its command
// (a long one too) and its environment, in namespaces that show it
// alone; the agent's end leaves no such init behind.
func TestForkJobOnInitMadeAhead(t *testing.T) {
	d, _ := isolated(t)
	d.start("first", "print first", false)
	d.output("first")
	long := ": " + strings.Repeat("x", 60<<10) + "; "
	d.start("second", long+`print -r -- "$SHELLJOB_JOB $(id -u) $PWD"; ls /proc | grep -c '^[0-9]'`, false)
	got := d.output("second")
	var rec struct{ UID int }
	b, err := os.ReadFile(filepath.Join(d.dir, "jobs", "second", "job.json"))
	if err == nil {
		err = json.Unmarshal(b, &rec)
	}
	if err != nil || rec.UID < agent.ForkUIDBase {
		t.Fatalf("user of second: %+v %v", rec, err)
	}
	// The shell, and the command substitution's and pipe's processes.
	if want := fmt.Sprintf("second %d %s\n", rec.UID, filepath.Join(d.dir, "jobs", "second", "home")); !strings.HasPrefix(got, want) {
		t.Errorf("second: %q, want it to start %q", got, want)
	}
	if !strings.Contains(d.logs.String(), `"msg":"Job started on an init made ahead","job":"second"`) {
		t.Errorf("second did not start on an init made ahead:\n%s", d.logs.String())
	}
	before := initsOf(t, d.p.Pid())
	if len(before) == 0 {
		t.Fatal("no init waits for the next job")
	}
	d.stop()
	for _, pid := range before {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			t.Errorf("the init %d made ahead outlived the agent", pid)
		}
	}
}

// initsOf lists the job inits whose parent is the process ppid.
func initsOf(t *testing.T, ppid int) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !strings.Contains(string(cmdline), "\x00"+agent.InitCommand+"\x00") {
			continue
		}
		// The parent is the field after the command's closing parenthesis
		// and the state.
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		i := bytes.LastIndexByte(stat, ')')
		if err != nil || i < 0 {
			continue
		}
		if f := strings.Fields(string(stat[i+1:])); len(f) > 1 && f[1] == strconv.Itoa(ppid) {
			out = append(out, pid)
		}
	}
	return out
}
