package agent

// The spools of ended jobs stay, readable, while the worker has room for
// them: past a budget below the spool volume's sizeLimit, the agent
// removes the spools of delivered jobs, oldest first, until the budget
// again holds the spools, the room the running jobs' output may still
// take, and the room of one more job's. A spool whose job was not
// delivered never goes to make room: when those alone leave no room for
// one more job, the worker is full (agentapi.Worker.SpoolFull), and the
// operator places no new job there until deliveries free some room. So
// the volume never outgrows its sizeLimit for output, and the kubelet
// never evicts the worker for it. A job's files count where they are, but
// are not reserved for: the output's caps do not cap them.

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"shelljob.dev/shelljob/agent/spool"
	"shelljob.dev/shelljob/internal/agentapi"
)

const (
	// deliveredFile marks a job delivered, in its directory.
	deliveredFile = "delivered"
	// roomInterval paces the budget's look at the running jobs' spools.
	roomInterval = 5 * time.Second
)

// budget is the spools' share of the volume.
type budget struct {
	// max is the budget; 0 for none.
	max int64
	// perJob is the most disk one job's output takes.
	perJob int64

	// mu serializes makeRoom.
	mu sync.Mutex
	// Guarded by Daemon.mu.
	used int64
	full bool
}

// newBudget is the budget of a volume of sizeLimit bytes (0: unknown), for
// spools of lim: a sixteenth of it is left out, for what the budget does
// not count as it grows (records, the files of running jobs, a put on its
// way).
func newBudget(sizeLimit int64, lim spool.Limits) *budget {
	b := &budget{perJob: lim.MaxDisk()}
	if sizeLimit > 0 {
		b.max = sizeLimit - sizeLimit/16
	}
	return b
}

// keepRoom looks at the budget every roomInterval while ctx lasts: the
// running jobs' spools grow between their ends.
func (d *Daemon) keepRoom(ctx context.Context) {
	if d.room.max == 0 {
		return
	}
	every(ctx, roomInterval, func() bool {
		d.makeRoom()
		return true
	})
}

// makeRoom removes delivered spools, oldest first, while the budget does
// not hold the spools, the running jobs' room and one more job's; and
// reports whether the worker is full, when that changed.
func (d *Daemon) makeRoom() {
	b := d.room
	if b.max == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	d.mu.Lock()
	var ended, delivered []*job
	known := map[string]bool{}
	// pending: a running job, or a spool whose delivery will free room. A
	// worker with none is never full, however small its budget.
	pending := false
	for id, j := range d.jobs {
		known[id] = true
		switch {
		case !j.ended:
			pending = true
		case j.delivered:
			ended = append(ended, j)
			delivered = append(delivered, j)
		default:
			ended = append(ended, j)
			pending = true
		}
	}
	running := map[string]bool{}
	for _, j := range d.jobs {
		running[j.id] = !j.ended
	}
	d.mu.Unlock()
	var used, reserve int64
	for _, j := range ended {
		used += j.disk
	}
	// The running jobs, and inputs put for jobs that did not start yet.
	if ents, err := os.ReadDir(d.jobsDir); err == nil {
		for _, e := range ents {
			if known[e.Name()] && !running[e.Name()] {
				continue
			}
			u := diskUsage(filepath.Join(d.jobsDir, e.Name()))
			used += u
			if running[e.Name()] {
				reserve += max(b.perJob-u, 0)
			}
		}
	}
	slices.SortFunc(delivered, func(a, b *job) int { return a.exit.EndedAt.Compare(b.exit.EndedAt) })
	for len(delivered) > 0 && used+reserve+b.perJob > b.max {
		j := delivered[0]
		delivered = delivered[1:]
		if err := d.remove(j); err != nil {
			d.log.Error(err, "Could not remove a delivered spool to make room", "job", j.id)
			continue
		}
		used -= j.disk
		d.log.V(1).Info("Removed a delivered spool to make room", "job", j.id, "bytes", j.disk)
	}
	full := pending && used+reserve+b.perJob > b.max
	d.mu.Lock()
	defer d.mu.Unlock()
	b.used = used
	if full != b.full {
		b.full = full
		d.broadcastLocked(d.workerEventLocked(time.Now()))
		if full {
			d.log.Info("The spools of undelivered jobs leave no room for another job: taking none until some are delivered",
				"spoolBytes", used, "reserveBytes", reserve, "budgetBytes", b.max)
		} else {
			d.log.Info("The spools have room for another job again", "spoolBytes", used, "budgetBytes", b.max)
		}
	}
}

// remove forgets an ended job and removes its directory.
func (d *Daemon) remove(j *job) error {
	d.mu.Lock()
	if d.jobs[j.id] == j {
		delete(d.jobs, j.id)
	}
	d.mu.Unlock()
	return os.RemoveAll(j.dir)
}

// workerEventLocked is the worker's state; the caller holds d.mu.
func (d *Daemon) workerEventLocked(now time.Time) agentapi.Event {
	iso, limit := d.isolation()
	return agentapi.Event{Type: agentapi.EventWorker, Time: now, Worker: &agentapi.Worker{
		Isolation: iso, IsolationLimit: limit,
		SpoolFull: d.room.full, SpoolBytes: d.room.used, SpoolBudget: d.room.max,
	}}
}

// Delivered marks the job delivered: its spool may go once the worker
// needs the room. A job the agent no longer knows is delivered already.
func (d *Daemon) Delivered(id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	j, err := d.lookup(id)
	if errors.Is(err, agentapi.ErrUnknownJob) {
		return nil
	}
	if err := os.WriteFile(filepath.Join(j.dir, deliveredFile), nil, 0o600); err != nil {
		return err
	}
	d.mu.Lock()
	j.delivered = true
	d.mu.Unlock()
	d.makeRoom()
	return nil
}

// diskUsage is the disk that path and all below it take, as du counts it.
func diskUsage(path string) int64 {
	var n int64
	_ = filepath.WalkDir(path, func(_ string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if fi, err := e.Info(); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			}
		}
		return nil
	})
	return n
}
