package botmetrics_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gotd/td/tg"
	"github.com/gotd/td/tgerr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/bot/botmetrics"
	"shelljob.dev/shelljob/bot/followers"
	"shelljob.dev/shelljob/bot/jobs"
	"shelljob.dev/shelljob/bot/probes"
	"shelljob.dev/shelljob/internal/liveoutput"
)

// register adds a job named name to r, observed in phase (none: queued).
func register(r *jobs.Registry, name string, phase shellv1alpha1.ShellJobPhase) *jobs.Job {
	j := jobs.New(jobs.Info{Name: name, Created: time.Now()})
	if phase != "" {
		j.Observe(&shellv1alpha1.ShellJob{Status: shellv1alpha1.ShellJobStatus{Phase: phase}})
	}
	r.Register(j)
	return j
}

func TestJobsByState(t *testing.T) {
	r := jobs.NewRegistry()
	register(r, "queued", "")
	register(r, "running", shellv1alpha1.PhaseRunning)
	register(r, "running-too", shellv1alpha1.PhaseRunning)
	register(r, "stopping", shellv1alpha1.PhaseStopping)
	register(r, "delivering", shellv1alpha1.PhaseSucceeded).MarkEnded()
	gone := register(r, "delivered", shellv1alpha1.PhaseSucceeded)
	gone.MarkEnded()
	r.Finish(gone)

	want := `
# HELP shelljob_bot_jobs Jobs the bot shows, from their command to the delivery of their final, by state (queued, running, stopping, delivering).
# TYPE shelljob_bot_jobs gauge
shelljob_bot_jobs{state="delivering"} 1
shelljob_bot_jobs{state="queued"} 1
shelljob_bot_jobs{state="running"} 2
shelljob_bot_jobs{state="stopping"} 1
`
	if err := testutil.CollectAndCompare(botmetrics.Jobs(r), strings.NewReader(want), botmetrics.JobsName); err != nil {
		t.Error(err)
	}
}

// follow starts a follower of key in s that runs until the test ends.
func follow(t *testing.T, s *followers.Set, key string) *followers.Follower {
	t.Helper()
	f, err := s.Start(t.Context(), key, func(ctx context.Context) { <-ctx.Done() })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Stop)
	return f
}

func TestFollowers(t *testing.T) {
	var s followers.Set
	g := botmetrics.Followers(&s)
	want := func(n int) {
		t.Helper()
		text := `
# HELP shelljob_bot_followers Output followers the bot runs: one per job whose output it reads.
# TYPE shelljob_bot_followers gauge
shelljob_bot_followers ` + strconv.Itoa(n) + "\n"
		if err := testutil.CollectAndCompare(g, strings.NewReader(text), botmetrics.FollowersName); err != nil {
			t.Error(err)
		}
	}
	want(0)
	a := follow(t, &s, "job-a")
	follow(t, &s, "job-b")
	want(2)
	a.Stop()
	want(1)
}

// TestServed: every metric of Names is on the bot's /metrics, beside the
// process's, and passes Prometheus's lint (units, _total suffixes, help).
func TestServed(t *testing.T) {
	r := jobs.NewRegistry()
	register(r, "running", shellv1alpha1.PhaseRunning)
	var fs followers.Set
	follow(t, &fs, "running")
	kept := liveoutput.NewBudget(1 << 20)
	liveoutput.New(liveoutput.Options{HeadBytes: 4 << 10, Budget: kept}).Write(liveoutput.Stdout, make([]byte, 1000))
	botmetrics.UpdateTaken(botmetrics.UpdateMessage)
	_ = botmetrics.Invoker(failing(tgerr.New(420, "FLOOD_WAIT_2"))).Invoke(context.Background(), &tg.MessagesSendMessageRequest{}, nil)

	rec := httptest.NewRecorder()
	probes.Metrics(botmetrics.Collectors(r, &fs, kept)...).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("/metrics: %d\n%s", rec.Code, rec.Body)
	}
	body := rec.Body.String()
	for _, name := range append(botmetrics.Names(), "process_resident_memory_bytes") {
		if !strings.Contains(body, "\n"+name) {
			t.Errorf("no %s on /metrics", name)
		}
	}
	for _, line := range []string{
		`shelljob_bot_jobs{state="running"} 1`,
		`shelljob_bot_followers 1`,
		`shelljob_bot_output_memory_bytes 1000`,
		`shelljob_bot_updates_total{kind="callback"} 0`,
		`shelljob_bot_telegram_flood_waits_total{method="messages.sendMessage"}`,
		`shelljob_bot_telegram_call_errors_total{method="messages.sendMessage",type="FLOOD_WAIT"}`,
	} {
		if !strings.Contains(body, line) {
			t.Errorf("no %s on /metrics", line)
		}
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(botmetrics.Collectors(r, &fs, kept)...)
	problems, err := testutil.GatherAndLint(reg, botmetrics.Names()...)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}
