package scheduler

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/texts"
)

const (
	fork     = shellv1alpha1.ModeFork
	stateful = shellv1alpha1.ModeStateful
	direct   = shellv1alpha1.ModeDirect
	console  = shellv1alpha1.ModeConsole
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func workers(rev string, n int) []Worker {
	ws := make([]Worker, n)
	for i := range ws {
		ws[i] = Worker{Name: name(rev, i), Index: int32(i), Revision: rev, Ready: true}
	}
	return ws
}

func name(rev string, i int) string { return "p-" + rev + "-" + string(rune('0'+i)) }

// full marks the workers of indexes full.
func full(ws []Worker, indexes ...int) []Worker {
	for _, i := range indexes {
		ws[i].SpoolFull = true
	}
	return ws
}

func job(n string, mode shellv1alpha1.ShellJobMode, at int, pod string) Job {
	return Job{Name: n, Mode: mode, Created: t0.Add(time.Duration(at) * time.Second), Pod: pod}
}

func TestPlace(t *testing.T) {
	pool := Pool{Revision: "r1", Replicas: 3, StatefulWorker: 0}
	cases := map[string]struct {
		job     Job
		pool    Pool
		workers []Worker
		jobs    []Job
		want    Decision
	}{
		"fork takes a free worker other than the stateful one": {
			job:     job("a", fork, 0, ""),
			workers: workers("r1", 3),
			want:    Decision{Pod: "p-r1-1", Reason: "Assigned", Message: "assigned to worker p-r1-1"},
		},
		"fork skips a worker whose spool is full": {
			job:     job("a", fork, 0, ""),
			workers: full(workers("r1", 3), 1),
			want:    Decision{Pod: "p-r1-2", Reason: "Assigned", Message: "assigned to worker p-r1-2"},
		},
		"fork waits, saying why, when the free workers are full": {
			job:     job("b", fork, 1, ""),
			workers: full(workers("r1", 3), 1, 2),
			jobs:    []Job{job("a", fork, 0, "p-r1-0")},
			want: Decision{Reason: "SpoolFull", Message: "waiting for a worker with room: the spools of p-r1-1, p-r1-2 are full " +
				"of output not delivered yet, and take no new job until some is"},
		},
		"direct waits when every worker is full": {
			job:     job("a", direct, 0, ""),
			workers: full(workers("r1", 2), 0, 1),
			want: Decision{Reason: "SpoolFull", Message: "waiting for a worker with room: the spools of p-r1-0, p-r1-1 are full " +
				"of output not delivered yet, and take no new job until some is"},
		},
		"direct goes beside a running job rather than to a full worker": {
			job:     job("b", direct, 1, ""),
			workers: full(workers("r1", 2), 1),
			jobs:    []Job{job("a", fork, 0, "p-r1-0")},
			want:    Decision{Pod: "p-r1-0", Reason: "Assigned", Message: "assigned to worker p-r1-0, which runs 1 other job(s)"},
		},
		"stateful waits while the stateful worker is full": {
			job:     job("a", stateful, 0, ""),
			workers: full(workers("r1", 3), 0),
			want: Decision{Reason: "SpoolFull", Message: "waiting for a worker with room: the spools of p-r1-0 are full " +
				"of output not delivered yet, and take no new job until some is"},
		},
		"fork takes the stateful worker last": {
			job:     job("c", fork, 2, ""),
			workers: workers("r1", 3),
			jobs:    []Job{job("a", fork, 0, "p-r1-1"), job("b", fork, 1, "p-r1-2")},
			want:    Decision{Pod: "p-r1-0", Reason: "Assigned", Message: "assigned to worker p-r1-0"},
		},
		"fork waits when every worker is seated": {
			job:     job("d", fork, 3, ""),
			workers: workers("r1", 3),
			jobs:    []Job{job("a", fork, 0, "p-r1-0"), job("b", fork, 1, "p-r1-1"), job("c", stateful, 2, "p-r1-2")},
			want:    Decision{Reason: "NoIdleWorker", Message: "waiting for a free worker"},
		},
		"fifo: an older queued job gets the only free worker": {
			job:     job("new", fork, 5, ""),
			workers: workers("r1", 3),
			jobs:    []Job{job("a", fork, 0, "p-r1-0"), job("b", fork, 1, "p-r1-1"), job("old", fork, 4, "")},
			want:    Decision{Reason: "NoIdleWorker", Message: "waiting for a free worker"},
		},
		"fifo: same creation time orders by name": {
			job:     job("job-02", fork, 4, ""),
			workers: workers("r1", 3),
			jobs:    []Job{job("a", fork, 0, "p-r1-0"), job("b", fork, 1, "p-r1-1"), job("job-01", fork, 4, "")},
			want:    Decision{Reason: "NoIdleWorker", Message: "waiting for a free worker"},
		},
		"fifo: the oldest queued job gets the free worker": {
			job:     job("job-01", fork, 4, ""),
			workers: workers("r1", 3),
			jobs:    []Job{job("a", fork, 0, "p-r1-0"), job("b", fork, 1, "p-r1-1"), job("job-02", fork, 4, "")},
			want:    Decision{Pod: "p-r1-2", Reason: "Assigned", Message: "assigned to worker p-r1-2"},
		},
		"fifo: a stopping queued job ahead is skipped": {
			job:     job("new", fork, 5, ""),
			workers: workers("r1", 3),
			jobs: []Job{job("a", fork, 0, "p-r1-0"), job("b", fork, 1, "p-r1-1"),
				{Name: "old", Mode: fork, Created: t0.Add(4 * time.Second), Stopping: true}},
			want: Decision{Pod: "p-r1-2", Reason: "Assigned", Message: "assigned to worker p-r1-2"},
		},
		"stateful takes the stateful worker": {
			job:     job("s", stateful, 2, ""),
			workers: workers("r1", 3),
			jobs:    []Job{job("a", fork, 0, "p-r1-1")},
			want:    Decision{Pod: "p-r1-0", Reason: "Assigned", Message: "assigned to worker p-r1-0"},
		},
		"stateful waits for the stateful worker while others are free": {
			job:     job("s", stateful, 2, ""),
			workers: workers("r1", 3),
			jobs:    []Job{job("a", stateful, 0, "p-r1-0")},
			want:    Decision{Reason: "StatefulWorkerBusy", Message: "waiting for the stateful worker 0"},
		},
		"stateful honours the pool's stateful index": {
			job:     job("s", stateful, 2, ""),
			pool:    Pool{Revision: "r1", Replicas: 3, StatefulWorker: 2},
			workers: workers("r1", 3),
			want:    Decision{Pod: "p-r1-2", Reason: "Assigned", Message: "assigned to worker p-r1-2"},
		},
		"stateful behind an older fork that takes the stateful worker waits": {
			job:     job("s", stateful, 3, ""),
			workers: workers("r1", 3),
			jobs:    []Job{job("a", fork, 0, "p-r1-1"), job("b", fork, 1, "p-r1-2"), job("f", fork, 2, "")},
			want:    Decision{Reason: "StatefulWorkerBusy", Message: "waiting for the stateful worker 0"},
		},
		"a fork behind a waiting stateful job still takes a free worker": {
			job:     job("f", fork, 3, ""),
			workers: workers("r1", 3),
			jobs:    []Job{job("a", fork, 0, "p-r1-0"), job("s", stateful, 1, "")},
			want:    Decision{Pod: "p-r1-1", Reason: "Assigned", Message: "assigned to worker p-r1-1"},
		},
		"direct runs on the least busy worker while every worker is busy": {
			job:     job("d", direct, 9, ""),
			workers: workers("r1", 3),
			jobs: []Job{job("a", fork, 0, "p-r1-0"), job("b", fork, 1, "p-r1-1"), job("c", fork, 2, "p-r1-2"),
				job("x", direct, 3, "p-r1-0"), job("q", fork, 4, "")},
			want: Decision{Pod: "p-r1-1", Reason: "Assigned", Message: "assigned to worker p-r1-1, which runs 1 other job(s)"},
		},
		"direct takes no seat": {
			job:     job("f", fork, 5, ""),
			workers: workers("r1", 1),
			pool:    Pool{Revision: "r1", Replicas: 1},
			jobs:    []Job{job("x", direct, 0, "p-r1-0")},
			want:    Decision{Pod: "p-r1-0", Reason: "Assigned", Message: "assigned to worker p-r1-0, which runs 1 other job(s)"},
		},
		"old revision, unready and surplus workers take no jobs": {
			job: job("a", fork, 0, ""),
			workers: append(workers("r0", 3),
				Worker{Name: "p-r1-0", Index: 0, Revision: "r1"},
				Worker{Name: "p-r1-5", Index: 5, Revision: "r1", Ready: true}),
			want: Decision{Reason: "NoReadyWorker", Message: "no ready worker of revision r1 yet"},
		},
		"direct waits only when no worker is ready": {
			job:     job("d", direct, 0, ""),
			workers: nil,
			want:    Decision{Reason: "NoReadyWorker", Message: "no ready worker of revision r1 yet"},
		},
		"a console takes a free worker as a fork does, and its seat": {
			job:     job("c", console, 2, ""),
			workers: workers("r1", 3),
			jobs:    []Job{job("a", fork, 0, "p-r1-1"), job("b", console, 1, "p-r1-2")},
			want:    Decision{Pod: "p-r1-0", Reason: "Assigned", Message: "assigned to worker p-r1-0"},
		},
		"a console waits in line when every worker is seated": {
			job:     job("c", console, 5, ""),
			workers: workers("r1", 3),
			jobs:    []Job{job("a", console, 0, "p-r1-0"), job("b", fork, 1, "p-r1-1"), job("s", stateful, 2, "p-r1-2"), job("old", fork, 4, "")},
			want:    Decision{Reason: "NoIdleWorker", Message: "waiting for a free worker"},
		},
		"a console takes the worker it prefers when it is free": {
			job:     Job{Name: "c", Mode: console, Created: t0, Preferred: "p-r1-2"},
			workers: workers("r1", 3),
			want:    Decision{Pod: "p-r1-2", Reason: "Assigned", Message: "assigned to worker p-r1-2"},
		},
		"fork takes the worker it prefers when it is free": {
			job:     Job{Name: "a", Mode: fork, Created: t0, Preferred: "p-r1-2"},
			workers: workers("r1", 3),
			want:    Decision{Pod: "p-r1-2", Reason: "Assigned", Message: "assigned to worker p-r1-2"},
		},
		"fork prefers no seated worker": {
			job:     Job{Name: "b", Mode: fork, Created: t0.Add(time.Second), Preferred: "p-r1-2"},
			workers: workers("r1", 3),
			jobs:    []Job{job("a", fork, 0, "p-r1-2")},
			want:    Decision{Pod: "p-r1-1", Reason: "Assigned", Message: "assigned to worker p-r1-1"},
		},
		"fork prefers the stateful worker last still": {
			job:     Job{Name: "a", Mode: fork, Created: t0, Preferred: "p-r1-0"},
			workers: workers("r1", 3),
			want:    Decision{Pod: "p-r1-1", Reason: "Assigned", Message: "assigned to worker p-r1-1"},
		},
		"fork prefers no worker of an old revision": {
			job:     Job{Name: "a", Mode: fork, Created: t0, Preferred: "p-r0-2"},
			workers: append(workers("r0", 3), workers("r1", 3)...),
			want:    Decision{Pod: "p-r1-1", Reason: "Assigned", Message: "assigned to worker p-r1-1"},
		},
		"an older queued job takes the worker a newer one prefers": {
			job:     Job{Name: "new", Mode: fork, Created: t0.Add(5 * time.Second), Preferred: "p-r1-2"},
			workers: workers("r1", 3),
			jobs:    []Job{job("a", fork, 0, "p-r1-0"), job("b", fork, 1, "p-r1-1"), job("old", fork, 4, "")},
			want:    Decision{Reason: "NoIdleWorker", Message: "waiting for a free worker"},
		},
		"stateful and direct go their own way": {
			job:     Job{Name: "s", Mode: stateful, Created: t0, Preferred: "p-r1-2"},
			workers: workers("r1", 3),
			want:    Decision{Pod: "p-r1-0", Reason: "Assigned", Message: "assigned to worker p-r1-0"},
		},
		"queued jobs move to the new revision": {
			job:     job("q", fork, 5, ""),
			workers: append(workers("r0", 2), workers("r1", 3)...),
			jobs:    []Job{job("a", fork, 0, "p-r0-0"), job("b", fork, 1, "p-r0-1")},
			want:    Decision{Pod: "p-r1-1", Reason: "Assigned", Message: "assigned to worker p-r1-1"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := pool
			if tc.pool.Revision != "" {
				p = tc.pool
			}
			got := Place(tc.job, p, tc.workers, tc.jobs)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Place (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPlaceFIFO places a burst of jobs one at a time, as the reconciler
// does, in a shuffled order of reconciles: workers go to the oldest jobs.
func TestPlaceFIFO(t *testing.T) {
	pool := Pool{Revision: "r1", Replicas: 4}
	ws := workers("r1", 4)
	var jobs []Job
	for i := range 10 {
		jobs = append(jobs, job(string(rune('a'+i)), fork, 0, ""))
	}
	for _, idx := range []int{9, 3, 7, 0, 5, 1, 8, 2, 6, 4} {
		d := Place(jobs[idx], pool, ws, jobs)
		jobs[idx].Pod = d.Pod
	}
	var got []string
	for _, j := range jobs {
		if j.Pod != "" {
			got = append(got, j.Name)
		}
	}
	if diff := cmp.Diff([]string{"a", "b", "c", "d"}, got); diff != "" {
		t.Errorf("placed jobs (-want +got):\n%s", diff)
	}
}

func TestLoads(t *testing.T) {
	got := Loads([]Job{job("a", fork, 0, "w0"), job("b", direct, 0, "w0"), job("c", direct, 0, "w1"), job("q", fork, 0, "")})
	want := map[string]Load{"w0": {Jobs: 2, Seated: true}, "w1": {Jobs: 1}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Loads (-want +got):\n%s", diff)
	}
}

func TestSchedule(t *testing.T) {
	pool := Pool{Revision: "r1", Replicas: 3, StatefulWorker: 0}
	jobs := []Job{
		job("running", fork, 0, "p-r1-1"),
		job("s", stateful, 3, ""),
		job("b", fork, 2, ""),
		job("a", fork, 1, ""),
		job("d", direct, 4, ""),
		job("c", fork, 5, ""),
		{Name: "stopped", Mode: fork, Created: t0, Stopping: true},
	}
	want := []Assignment{
		{Job: "a", Decision: Decision{Pod: "p-r1-2", Reason: "Assigned", Message: "assigned to worker p-r1-2"}},
		{Job: "b", Decision: Decision{Pod: "p-r1-0", Reason: "Assigned", Message: "assigned to worker p-r1-0"}},
		{Job: "s", Decision: Decision{Reason: "StatefulWorkerBusy", Message: "waiting for the stateful worker 0"}},
		{Job: "d", Decision: Decision{Pod: "p-r1-0", Reason: "Assigned", Message: "assigned to worker p-r1-0, which runs 1 other job(s)"}},
		{Job: "c", Decision: Decision{Reason: "NoIdleWorker", Message: "waiting for a free worker"}},
	}
	if diff := cmp.Diff(want, Schedule(pool, workers("r1", 3), jobs)); diff != "" {
		t.Errorf("Schedule (-want +got):\n%s", diff)
	}
}

func userJob(n, user string, mode shellv1alpha1.ShellJobMode, at int, pod string) Job {
	j := job(n, mode, at, pod)
	j.User = user
	return j
}

// TestScheduleMaxRunningPerUser: a user at the pool's cap waits, however
// free the workers, and the others' jobs behind them go past; one user's
// jobs keep their order; Direct jobs count, and wait too.
func TestScheduleMaxRunningPerUser(t *testing.T) {
	capped := Pool{Name: "dev", Revision: "r1", Replicas: 4, StatefulWorker: 3, MaxRunningPerUser: 2}
	atCap := func(user string, n int32) Decision {
		// Each case's user is at their cap, n.
		return Decision{Reason: "MaxRunningPerUser", Message: texts.MaxRunningPerUser(user, n, n, "dev")}
	}
	at := func(pod string, others int) Decision {
		d := Decision{Pod: pod, Reason: "Assigned", Message: "assigned to worker " + pod}
		if others > 0 {
			d.Message += fmt.Sprintf(", which runs %d other job(s)", others)
		}
		return d
	}
	cases := map[string]struct {
		pool Pool
		jobs []Job
		want []Assignment
	}{
		"alice's five jobs at once: two run, bob's go past the rest": {
			pool: capped,
			jobs: []Job{
				userJob("a1", "alice", fork, 1, ""), userJob("a2", "alice", fork, 2, ""), userJob("a3", "alice", fork, 3, ""),
				userJob("a4", "alice", fork, 4, ""), userJob("a5", "alice", fork, 5, ""),
				userJob("b1", "bob", fork, 6, ""), userJob("b2", "bob", fork, 7, ""),
			},
			want: []Assignment{
				{Job: "a1", Decision: at("p-r1-0", 0)},
				{Job: "a2", Decision: at("p-r1-1", 0)},
				{Job: "a3", Decision: atCap("alice", 2)},
				{Job: "a4", Decision: atCap("alice", 2)},
				{Job: "a5", Decision: atCap("alice", 2)},
				{Job: "b1", Decision: at("p-r1-2", 0)},
				{Job: "b2", Decision: at("p-r1-3", 0)},
			},
		},
		"running and stopping jobs count; the freed seat goes to the oldest of alice's": {
			pool: capped,
			jobs: []Job{
				userJob("a1", "alice", fork, 1, "p-r1-0"),
				{Name: "a2", User: "alice", Mode: fork, Created: t0, Pod: "p-r1-1", Stopping: true},
				userJob("a4", "alice", fork, 4, ""), userJob("a3", "alice", fork, 3, ""),
			},
			want: []Assignment{
				{Job: "a3", Decision: atCap("alice", 2)},
				{Job: "a4", Decision: atCap("alice", 2)},
			},
		},
		"one seat of alice's free": {
			pool: capped,
			jobs: []Job{userJob("a1", "alice", fork, 1, "p-r1-0"), userJob("a4", "alice", fork, 4, ""), userJob("a3", "alice", fork, 3, "")},
			want: []Assignment{
				{Job: "a3", Decision: at("p-r1-1", 0)},
				{Job: "a4", Decision: atCap("alice", 2)},
			},
		},
		"Direct jobs count": {
			pool: capped,
			jobs: []Job{userJob("d1", "alice", direct, 1, "p-r1-0"), userJob("d2", "alice", direct, 2, "p-r1-0"), userJob("a3", "alice", fork, 3, "")},
			want: []Assignment{{Job: "a3", Decision: atCap("alice", 2)}},
		},
		"a Direct job at the cap waits, though it never waits for a free worker": {
			pool: capped,
			jobs: []Job{userJob("a1", "alice", fork, 1, "p-r1-0"), userJob("a2", "alice", fork, 2, "p-r1-1"), userJob("d3", "alice", direct, 3, "")},
			want: []Assignment{{Job: "d3", Decision: atCap("alice", 2)}},
		},
		"a Direct job below the cap goes beside busy workers": {
			pool: Pool{Name: "dev", Revision: "r1", Replicas: 1, MaxRunningPerUser: 2},
			jobs: []Job{userJob("b1", "bob", fork, 1, "p-r1-0"), userJob("d2", "alice", direct, 2, "")},
			want: []Assignment{{Job: "d2", Decision: at("p-r1-0", 1)}},
		},
		"a cap of one": {
			pool: Pool{Name: "dev", Revision: "r1", Replicas: 4, MaxRunningPerUser: 1},
			jobs: []Job{userJob("a1", "alice", fork, 1, ""), userJob("a2", "alice", stateful, 2, ""), userJob("b1", "bob", stateful, 3, "")},
			want: []Assignment{
				{Job: "a1", Decision: at("p-r1-1", 0)},
				{Job: "a2", Decision: atCap("alice", 1)},
				{Job: "b1", Decision: at("p-r1-0", 0)},
			},
		},
		"jobs with no user share one cap": {
			pool: Pool{Name: "dev", Revision: "r1", Replicas: 4, MaxRunningPerUser: 1},
			jobs: []Job{job("x", fork, 1, "p-r1-1"), job("y", fork, 2, "")},
			want: []Assignment{{Job: "y", Decision: atCap("", 1)}},
		},
		"no cap": {
			pool: Pool{Name: "dev", Revision: "r1", Replicas: 3},
			jobs: []Job{userJob("a1", "alice", fork, 1, "p-r1-1"), userJob("a2", "alice", fork, 2, "p-r1-2"), userJob("a3", "alice", fork, 3, "")},
			want: []Assignment{{Job: "a3", Decision: at("p-r1-0", 0)}},
		},
		"the cap before the workers: no ready worker, a capped user waits for their jobs": {
			pool: Pool{Name: "dev", Revision: "r2", Replicas: 3, MaxRunningPerUser: 1},
			jobs: []Job{userJob("a1", "alice", fork, 1, "p-r1-1"), userJob("a2", "alice", fork, 2, ""), userJob("b1", "bob", fork, 3, "")},
			want: []Assignment{
				{Job: "a2", Decision: atCap("alice", 1)},
				{Job: "b1", Decision: Decision{Reason: "NoReadyWorker", Message: "no ready worker of revision r2 yet"}},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Schedule(tc.pool, workers("r1", int(tc.pool.Replicas)), tc.jobs)); diff != "" {
				t.Errorf("Schedule (-want +got):\n%s", diff)
			}
		})
	}
}

// TestScheduleApproval: on a pool that requires approval, a job is placed
// once approved, as any other, and waits until then without taking a
// worker or counting against its user.
func TestScheduleApproval(t *testing.T) {
	pool := Pool{Name: "prod", Revision: "r1", Replicas: 2, StatefulWorker: 1, Approval: true, MaxRunningPerUser: 1}
	awaiting := Decision{Reason: "AwaitingApproval", Message: "waiting for approval: pool prod runs a job once someone other than its author approves it"}
	approved := func(j Job) Job { j.Approved = true; return j }
	got := Schedule(pool, workers("r1", 2), []Job{
		userJob("b1", "bob", fork, 1, ""),
		approved(userJob("b2", "bob", fork, 2, "")),
		approved(userJob("b3", "bob", direct, 3, "")),
		userJob("a1", "alice", direct, 4, ""),
		approved(userJob("a2", "alice", stateful, 5, "")),
	})
	want := []Assignment{
		{Job: "b1", Decision: awaiting},
		{Job: "b2", Decision: Decision{Pod: "p-r1-0", Reason: "Assigned", Message: "assigned to worker p-r1-0"}},
		{Job: "b3", Decision: Decision{Reason: "MaxRunningPerUser", Message: texts.MaxRunningPerUser("bob", 1, 1, "prod")}},
		{Job: "a1", Decision: awaiting},
		{Job: "a2", Decision: Decision{Pod: "p-r1-1", Reason: "Assigned", Message: "assigned to worker p-r1-1"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Schedule (-want +got):\n%s", diff)
	}
}
