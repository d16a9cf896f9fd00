package agent

import (
	"bufio"
	"cmp"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"shelljob.dev/shelljob/agent/proc"
)

// DefaultCgroupRoot is where a container sees its own cgroups.
const DefaultCgroupRoot = "/sys/fs/cgroup"

// oomKills reads how many processes the kernel's out-of-memory killer has
// killed in the agent's memory cgroup, which is the worker container's:
// memory.events under cgroup v2, memory/memory.oom_control under v1. ok is
// false where neither has the counter.
func oomKills(root string) (n int64, ok bool) {
	for _, name := range []string{"memory.events", filepath.Join("memory", "memory.oom_control")} {
		if n, ok := readCounter(filepath.Join(root, name), "oom_kill"); ok {
			return n, true
		}
	}
	return 0, false
}

// readCounter reads the "key value" line of key in a cgroup file.
func readCounter(path, key string) (int64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, found := strings.Cut(sc.Text(), " ")
		if !found || k != key {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		return n, err == nil
	}
	return 0, false
}

// oomPoll is how often the processes of running jobs are sampled for the
// out-of-memory killer's next victim: a process that lives shorter may be
// killed unattributed.
const oomPoll = 250 * time.Millisecond

// oomAttributeFor is how long kills the counter showed wait for their
// victims to be seen gone before they are given up unattributed.
const oomAttributeFor = 2 * time.Second

// oomWatch attributes the out-of-memory kills of the worker's cgroup to
// the jobs whose processes they killed: the kernel counts its kills per
// cgroup, the worker container's, and names no victim. The watch samples
// the processes of running jobs, with their owner and oom_score; when the
// counter grows by n, the n processes gone since the last sample with the
// highest oom_score, the killer's choice, are its victims, each its own
// job's.
type oomWatch struct {
	root string

	mu    sync.Mutex
	known bool
	count int64
	// procs is the last sample: each live process of a running job.
	procs map[int]oomSample
	// pending counts the kills not yet attributed, since pendingAt.
	pending   int64
	pendingAt time.Time
}

type oomSample struct {
	job   *job
	score int
}

func newOOMWatch(root string) *oomWatch {
	n, ok := oomKills(root)
	return &oomWatch{root: root, known: ok, count: n, procs: map[int]oomSample{}}
}

// run samples while ctx lasts.
func (w *oomWatch) run(ctx context.Context, d *Daemon) {
	if !w.known {
		return
	}
	every(ctx, oomPoll, func() bool {
		w.check(d, time.Now())
		return true
	})
}

// check takes a sample, and attributes the kills since the last one.
func (w *oomWatch) check(d *Daemon, now time.Time) {
	if !w.known {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	cur := d.sampleJobs()
	if n, ok := oomKills(w.root); ok && n > w.count {
		if w.pending == 0 {
			w.pendingAt = now
		}
		w.pending += n - w.count
		w.count = n
	}
	if w.pending > 0 {
		var gone []oomSample
		for pid, s := range w.procs {
			if _, live := cur[pid]; !live {
				gone = append(gone, s)
			}
		}
		slices.SortFunc(gone, func(a, b oomSample) int { return cmp.Compare(b.score, a.score) })
		for _, s := range gone {
			if w.pending == 0 {
				break
			}
			d.mu.Lock()
			s.job.oomKills++
			d.mu.Unlock()
			w.pending--
		}
		if w.pending > 0 && now.Sub(w.pendingAt) > oomAttributeFor {
			d.log.Info("Out-of-memory kills of no known job's process", "kills", w.pending)
			w.pending = 0
		}
	}
	w.procs = cur
}

// sampleJobs maps each live process of a running job to its job, with its
// oom_score: by user where jobs are isolated, by session elsewhere.
func (d *Daemon) sampleJobs() map[int]oomSample {
	out := map[int]oomSample{}
	running := d.running()
	if len(running) == 0 {
		return out
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		uid, sid, ok := proc.Owner(pid)
		if !ok {
			continue
		}
		j := d.jobOfProcess(running, uid, sid)
		if j == nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/oom_score")
		if err != nil {
			continue
		}
		score, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		out[pid] = oomSample{job: j, score: score}
	}
	return out
}

// jobOfProcess is the running job whose process runs as uid in session
// sid, or nil.
func (d *Daemon) jobOfProcess(running []*job, uid, sid int) *job {
	for _, j := range running {
		switch {
		case d.users != nil && j.rec.UID == uid:
			return j
		case d.users == nil && j.rec.PGID == sid:
			return j
		}
	}
	return nil
}
