package agent_test

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"shelljob.dev/shelljob/internal/agentapi"
)

// spoolBytes is what the job directories take, as du counts it.
func spoolBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	_ = filepath.Walk(filepath.Join(dir, "jobs"), func(_ string, fi os.FileInfo, err error) error {
		if err == nil {
			n += fi.Sys().(*syscall.Stat_t).Blocks * 512
		}
		return nil
	})
	return n
}

func (d *daemon) known(id string) bool {
	_, err := os.Stat(filepath.Join(d.dir, "jobs", id))
	return err == nil
}

// waitWorker waits for a worker event that matches.
func (d *daemon) waitWorker(match func(agentapi.Worker) bool) agentapi.Worker {
	d.t.Helper()
	e, err := d.waitEvent(waitLong, func(e agentapi.Event) bool { return e.Type == agentapi.EventWorker && match(*e.Worker) })
	if err != nil {
		d.t.Fatalf("waiting for the worker's state: %v", err)
	}
	return *e.Worker
}

// fullWait is how long TestSpoolBudget waits for a worker that may have
// become full to say so.
const fullWait = 3 * time.Second

// TestSpoolBudget: past the budget below the spool volume's size, the
// spools of delivered jobs go, oldest first, and an undelivered one stays,
// through an agent restart; the spools stay within the budget. Once
// undelivered spools alone leave no room for one more job's output, the
// worker says it is full, and says so no longer once deliveries made room.
func TestSpoolBudget(t *testing.T) {
	// A job's output takes at most 176 KiB here (64 KiB head and tail, 16
	// KiB after a stop, a 16 KiB chunk at either end of the gap); the
	// budget is 15/16 of 1 MiB.
	const limit = 1 << 20
	d := startDaemon(t, "--spool-size-limit="+strconv.Itoa(limit),
		"--head-bytes=65536", "--tail-bytes=65536", "--after-stop-bytes=16384", "--chunk-bytes=16384")
	if w := d.waitWorker(func(agentapi.Worker) bool { return true }); w.SpoolBudget != limit-limit/16 || w.SpoolFull {
		t.Fatalf("worker %+v, want a budget of %d and room", w, limit-limit/16)
	}
	const big = `head -c 300000 /dev/zero | tr '\0' x`
	run := func(id string, deliver bool) {
		t.Helper()
		d.start(id, big, false)
		d.exited(id)
		if deliver {
			if err := d.c.Delivered(ctxFor(t, waitShort), id); err != nil {
				t.Fatalf("delivered %s: %v", id, err)
			}
		}
		if n := spoolBytes(t, d.dir); n > limit-limit/16 {
			t.Errorf("after %s the spools take %d bytes, past the budget", id, n)
		}
	}
	run("d0", true)
	run("kept", false)
	for i := 1; i <= 6; i++ {
		run("d"+strconv.Itoa(i), true)
	}
	if !d.known("kept") {
		t.Error("the undelivered spool went to make room")
	}
	if d.known("d0") || d.known("d1") {
		t.Error("the oldest delivered spools stayed")
	}
	if !d.known("d6") {
		t.Error("the newest delivered spool went; room was made from the wrong end")
	}
	d.stop()
	d.run()

	// Undelivered ones, until they fill the budget: the delivered ones all
	// go first, then the worker is full. The agent works out whether it is
	// full just after the job's exit event: the first worker event after
	// that may be from before, so a full one is waited for, a while.
	for i := 0; ; i++ {
		id := "u" + strconv.Itoa(i)
		run(id, false)
		if _, err := d.waitEvent(fullWait, func(e agentapi.Event) bool { return e.Type == agentapi.EventWorker && e.Worker.SpoolFull }); err == nil {
			break
		}
		if i > 10 {
			t.Fatal("the worker never said it was full")
		}
	}
	if !d.known("kept") {
		t.Error("after a restart the undelivered spool went to make room")
	}
	for _, id := range []string{"d2", "d3", "d4", "d5", "d6"} {
		if d.known(id) {
			t.Errorf("the delivered spool %s stayed while the worker was full", id)
		}
	}
	if err := d.c.Delivered(ctxFor(t, waitShort), "kept"); err != nil {
		t.Fatal(err)
	}
	if w := d.waitWorker(func(w agentapi.Worker) bool { return !w.SpoolFull }); w.SpoolBytes > w.SpoolBudget {
		t.Errorf("room again, past the budget: %+v", w)
	}
	if d.known("kept") {
		t.Error("the spool delivered last stayed, though it was the only one that could make room")
	}
}

// TestSpoolBudgetBelowOneJob: a worker whose budget holds not even one
// job's output is not full while it holds nothing that a delivery or an
// end would free, so that it still takes jobs one at a time.
func TestSpoolBudgetBelowOneJob(t *testing.T) {
	d := startDaemon(t, "--spool-size-limit=65536")
	if w := d.waitWorker(func(agentapi.Worker) bool { return true }); w.SpoolFull {
		t.Fatalf("an empty worker is full: %+v", w)
	}
	d.start("one", "echo one", false)
	d.exited("one")
	d.waitWorker(func(w agentapi.Worker) bool { return w.SpoolFull })
	if err := d.c.Delivered(ctxFor(t, waitShort), "one"); err != nil {
		t.Fatal(err)
	}
	d.waitWorker(func(w agentapi.Worker) bool { return !w.SpoolFull })
}
