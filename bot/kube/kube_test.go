package kube_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/bot"
	"shelljob.dev/shelljob/bot/kube"
	"shelljob.dev/shelljob/internal/identity"
	"shelljob.dev/shelljob/internal/shelljob"
)

// telegramSpec is the job of a command of the chat admin tg, as the bot
// makes it.
func telegramSpec(cmd string, tg int64) shellv1alpha1.ShellJobSpec {
	return shellv1alpha1.ShellJobSpec{
		Command: cmd,
		Mode:    shellv1alpha1.ModeFork,
		Pool:    shellv1alpha1.DefaultPool,
		Origin: shellv1alpha1.ShellJobOrigin{
			Source: shellv1alpha1.OriginTelegram, User: identity.Default(tg).User, TelegramUser: tg,
			Chat: -1001234567890, Topic: 7, Message: 42,
		},
	}
}

// setStatus plays the operator: it writes the job's status.
func setStatus(t *testing.T, ns, name string, f func(*shellv1alpha1.ShellJobStatus)) {
	t.Helper()
	ctx := context.Background()
	for {
		var sj shellv1alpha1.ShellJob
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &sj); err != nil {
			t.Fatal(err)
		}
		f(&sj.Status)
		err := env.Client.Status().Update(ctx, &sj)
		if err == nil {
			return
		}
		if !isConflict(err) {
			t.Fatalf("update status: %v", err)
		}
	}
}

func get(t *testing.T, ns, name string) *shellv1alpha1.ShellJob {
	t.Helper()
	var sj shellv1alpha1.ShellJob
	if err := env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &sj); err != nil {
		t.Fatal(err)
	}
	return &sj
}

// watcher runs Cluster.Watch and hands over what it sees.
type watcher struct {
	seen chan *shellv1alpha1.ShellJob
	done chan error
}

func watchJob(ctx context.Context, c *kube.Cluster, name string) *watcher {
	w := &watcher{seen: make(chan *shellv1alpha1.ShellJob, 100), done: make(chan error, 1)}
	go func() { w.done <- c.Watch(ctx, name, func(sj *shellv1alpha1.ShellJob) { w.seen <- sj }) }()
	return w
}

// waitFor waits until the watch shows a job that matches.
func (w *watcher) waitFor(t *testing.T, what string, match func(*shellv1alpha1.ShellJob) bool) *shellv1alpha1.ShellJob {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case sj := <-w.seen:
			if match(sj) {
				return sj
			}
		case err := <-w.done:
			t.Fatalf("watch ended (%v) before %s", err, what)
		case <-timeout:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// A command submitted again (updates replayed after a restart) names the
// same job: the second Submit creates nothing and returns the first job.
func TestSubmitTwice(t *testing.T) {
	ns := namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := newCluster(t, ns)
	spec := telegramSpec("echo once", ada)
	name := shelljob.TelegramName(spec.Origin, time.Now())
	first, err := admin(c, ada).Submit(ctx, name, spec, map[string]string{shellv1alpha1.AnnotationPreview: "{}"})
	if err != nil {
		t.Fatal(err)
	}
	if first.Name != name {
		t.Errorf("name = %q, want %q", first.Name, name)
	}
	again, err := admin(c, ada).Submit(ctx, name, spec, map[string]string{shellv1alpha1.AnnotationPreview: `{"msg":1}`})
	if !errors.Is(err, bot.ErrJobExists) {
		t.Fatalf("second submit: %v, want ErrJobExists", err)
	}
	if again == nil || again.UID != first.UID {
		t.Fatalf("second submit returned %+v, want the first job", again)
	}
	var list shellv1alpha1.ShellJobList
	if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Errorf("%d jobs, want 1", len(list.Items))
	}
}

func TestJobLifecycle(t *testing.T) {
	ns := namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := newCluster(t, ns)

	spec := telegramSpec("sleep 100", bob)
	spec.Hold = true
	sj, err := admin(c, bob).Submit(ctx, "", spec, map[string]string{shellv1alpha1.AnnotationPreview: `{"chat":{"id":-1001234567890}}`})
	if err != nil {
		t.Fatal(err)
	}
	if sj.Name == "" || sj.UID == "" || sj.Namespace != ns {
		t.Fatalf("submitted job = %s/%s uid %q", sj.Namespace, sj.Name, sj.UID)
	}
	name := sj.Name
	w := watchJob(ctx, c, name)
	w.waitFor(t, "the job as created", func(sj *shellv1alpha1.ShellJob) bool { return sj.Spec.Hold })

	// The operator picks a pod; the bot releases the held job.
	setStatus(t, ns, name, func(s *shellv1alpha1.ShellJobStatus) {
		s.Number, s.Phase, s.Pod, s.Revision = 1, shellv1alpha1.PhaseQueued, "shell-abc", "r1"
	})
	w.waitFor(t, "the pod", func(sj *shellv1alpha1.ShellJob) bool { return sj.Status.Pod == "shell-abc" && sj.Status.Number == 1 })
	if err := admin(c, bob).Release(ctx, name); err != nil {
		t.Fatalf("release: %v", err)
	}
	w.waitFor(t, "the release", func(sj *shellv1alpha1.ShellJob) bool { return !sj.Spec.Hold })
	if err := admin(c, bob).Release(ctx, name); err != nil {
		t.Errorf("second release: %v", err)
	}

	setStatus(t, ns, name, func(s *shellv1alpha1.ShellJobStatus) {
		s.Phase, s.Ran, s.StartTime = shellv1alpha1.PhaseRunning, true, ptr.To(metav1.Now())
	})
	w.waitFor(t, "running", func(sj *shellv1alpha1.ShellJob) bool {
		return sj.Status.Phase == shellv1alpha1.PhaseRunning && sj.Status.Ran
	})

	// Stop: the first reason stays, and names its stopper.
	if out, sj, err := admin(c, bob).Stop(ctx, name); err != nil || out != shelljob.StopSent || !sj.Spec.Stop || sj.Spec.StopBy != identity.Default(bob).User {
		t.Fatalf("stop: %v, %v, %+v", out, err, sj)
	}
	w.waitFor(t, "the stop", func(sj *shellv1alpha1.ShellJob) bool { return sj.Spec.Stop })
	if out, _, err := c.Stop(ctx, name, shellv1alpha1.StopReasonShutdown); err != nil || out != shelljob.StopAlreadyRequested {
		t.Errorf("second stop: %v, %v", out, err)
	}
	if got := get(t, ns, name); got.Spec.StopReason != shellv1alpha1.StopReasonUser {
		t.Errorf("stop reason = %q, want the first one", got.Spec.StopReason)
	}

	if err := c.Annotate(ctx, name, shellv1alpha1.AnnotationPreview, `{"msg":5}`); err != nil {
		t.Fatalf("annotate: %v", err)
	}
	setStatus(t, ns, name, func(s *shellv1alpha1.ShellJobStatus) {
		s.Phase, s.ExitCode = shellv1alpha1.PhaseStopped, ptr.To[int32](130)
	})
	last := w.waitFor(t, "the end", func(sj *shellv1alpha1.ShellJob) bool { return sj.Status.Phase == shellv1alpha1.PhaseStopped })
	if last.Annotations[shellv1alpha1.AnnotationPreview] != `{"msg":5}` || *last.Status.ExitCode != 130 {
		t.Errorf("last seen = annotations %v, exit %d", last.Annotations, *last.Status.ExitCode)
	}

	// The operator deletes the job after its TTL: the watch ends with nil.
	if err := env.Client.Delete(ctx, last); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-w.done:
		if err != nil {
			t.Errorf("watch of a deleted job = %v, want nil", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the watch did not end when the job was deleted")
	}
	// Watching a job that is gone ends at once.
	if err := c.Watch(ctx, name, func(*shellv1alpha1.ShellJob) { t.Error("called for a deleted job") }); err != nil {
		t.Errorf("watch of a missing job = %v", err)
	}
}

// Two stops at once, with different reasons: both succeed and the job
// keeps one reason (the API refuses to change it once set).
func TestConcurrentStops(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	c := newCluster(t, ns)
	for range 5 {
		sj, err := admin(c, ada).Submit(ctx, "", telegramSpec("sleep 1", ada), nil)
		if err != nil {
			t.Fatal(err)
		}
		errs := make(chan error, 2)
		outs := make(chan shelljob.StopOutcome, 2)
		// The admin's stop, and the bot's own as it goes offline.
		for _, stop := range []func() (shelljob.StopOutcome, *shellv1alpha1.ShellJob, error){
			func() (shelljob.StopOutcome, *shellv1alpha1.ShellJob, error) { return admin(c, ada).Stop(ctx, sj.Name) },
			func() (shelljob.StopOutcome, *shellv1alpha1.ShellJob, error) {
				return c.Stop(ctx, sj.Name, shellv1alpha1.StopReasonShutdown)
			},
		} {
			go func() {
				out, _, err := stop()
				outs <- out
				errs <- err
			}()
		}
		first := 0
		for range 2 {
			if err := <-errs; err != nil {
				t.Errorf("stop: %v", err)
			}
			if <-outs != shelljob.StopAlreadyRequested {
				first++
			}
		}
		if first != 1 {
			t.Errorf("%d stops say they stopped the job, want one", first)
		}
		if got := get(t, ns, sj.Name); !got.Spec.Stop || got.Spec.StopReason == "" {
			t.Errorf("after the stops: stop %v reason %q", got.Spec.Stop, got.Spec.StopReason)
		}
	}
}

// The watch picks up again after the API server ends it, without losing
// a change.
func TestWatchOutlivesItsContext(t *testing.T) {
	ns := namespace(t)
	c := newCluster(t, ns)
	sj, err := admin(c, ada).Submit(context.Background(), "", telegramSpec("true", ada), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := watchJob(ctx, c, sj.Name)
	w.waitFor(t, "the job", func(*shellv1alpha1.ShellJob) bool { return true })
	cancel()
	select {
	case err := <-w.done:
		if err != context.Canceled {
			t.Errorf("watch after cancel = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not end with its context")
	}
}

func TestListRestartPoolAndDelivered(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	c := newCluster(t, ns)

	// A CLI job is not the bot's.
	cli := &shellv1alpha1.ShellJob{
		ObjectMeta: metav1.ObjectMeta{Name: "cli", Namespace: ns},
		Spec:       shellv1alpha1.ShellJobSpec{Command: "true", Origin: shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginCLI, User: "me"}},
	}
	if err := person(t, "me").Create(ctx, cli); err != nil {
		t.Fatal(err)
	}
	guest := telegramSpec("uptime", bob)
	guest.Origin.Chat, guest.Origin.Topic, guest.Origin.Message, guest.Origin.GuestQuery = 0, 0, 0, "123456789012345"
	var names []string
	for _, spec := range []shellv1alpha1.ShellJobSpec{telegramSpec("a", ada), telegramSpec("b", ada), guest} {
		sj, err := c.As(identity.Default(spec.Origin.TelegramUser)).Submit(ctx, "", spec, map[string]string{shellv1alpha1.AnnotationPreview: "{}"})
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, sj.Name)
	}
	setStatus(t, ns, names[0], func(s *shellv1alpha1.ShellJobStatus) {
		s.Phase, s.Pod, s.Revision, s.Ran = shellv1alpha1.PhaseRunning, "shell-1", "r1", true
	})
	if err := c.Annotate(ctx, names[1], shellv1alpha1.AnnotationDelivered, time.Now().UTC().Format(time.RFC3339)); err != nil {
		t.Fatal(err)
	}

	// The cache has seen the last change.
	all := listWhen(t, c, func(all []shellv1alpha1.ShellJob) bool {
		i := slices.IndexFunc(all, func(sj shellv1alpha1.ShellJob) bool { return sj.Name == names[1] })
		return len(all) == 3 && i >= 0 && all[i].Annotations[shellv1alpha1.AnnotationDelivered] != "" &&
			slices.ContainsFunc(all, func(sj shellv1alpha1.ShellJob) bool { return sj.Status.Revision == "r1" })
	})
	byName := map[string]shellv1alpha1.ShellJob{}
	for _, sj := range all {
		byName[sj.Name] = sj
	}
	if len(all) != 3 || byName["cli"].Name != "" {
		t.Fatalf("listed %d jobs: %v", len(all), byName)
	}
	if sj := byName[names[0]]; sj.Status.Revision != "r1" || sj.Status.Phase != shellv1alpha1.PhaseRunning {
		t.Errorf("listed status = %+v", sj.Status)
	}
	if _, ok := byName[names[1]].Annotations[shellv1alpha1.AnnotationDelivered]; !ok {
		t.Error("the delivered mark is not listed")
	}
	if _, ok := byName[names[0]].Annotations[shellv1alpha1.AnnotationDelivered]; ok {
		t.Error("an undelivered job is listed as delivered")
	}
	if g := byName[names[2]]; g.Spec.Origin.GuestQuery != "123456789012345" || g.Spec.Origin.TelegramUser != bob {
		t.Errorf("guest origin = %+v", g.Spec.Origin)
	}

	// Restarting a pool sets spec.restartedAt, and again later.
	pool := &shellv1alpha1.ShellPool{ObjectMeta: metav1.ObjectMeta{Name: shellv1alpha1.DefaultPool, Namespace: ns}}
	if err := admin(c, ada).RestartPool(ctx, shellv1alpha1.DefaultPool); err != nil {
		t.Fatalf("restart pool: %v", err)
	}
	var sp shellv1alpha1.ShellPool
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pool), &sp); err != nil {
		t.Fatal(err)
	}
	if sp.Spec.RestartedAt == nil {
		t.Fatal("restartedAt not set")
	}
	first := sp.Spec.RestartedAt.Time
	time.Sleep(1100 * time.Millisecond)
	if err := admin(c, ada).RestartPool(ctx, shellv1alpha1.DefaultPool); err != nil {
		t.Fatalf("second restart: %v", err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pool), &sp); err != nil {
		t.Fatal(err)
	}
	if !sp.Spec.RestartedAt.Time.After(first) {
		t.Errorf("second restart: restartedAt %v, first %v", sp.Spec.RestartedAt, first)
	}
	// A pool that does not exist is an error, not a new pool.
	if err := admin(c, ada).RestartPool(ctx, "nope"); err == nil {
		t.Error("restarting a missing pool succeeded")
	}
}

// listWhen polls List until what it returns meets cond, and returns that.
func listWhen(t *testing.T, c *kube.Cluster, cond func([]shellv1alpha1.ShellJob) bool) []shellv1alpha1.ShellJob {
	t.Helper()
	var all []shellv1alpha1.ShellJob
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		all, err = c.List(ctx)
		return err == nil && cond(all), nil
	})
	if err != nil {
		t.Fatalf("List never met the condition; last: %d jobs", len(all))
	}
	return all
}

// TestCacheKeepsOtherJobsSlim: List gives the bot's jobs whole, from the
// cache, which keeps another's job (the CLI's) as its name and origin.
func TestCacheKeepsOtherJobsSlim(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	c := newCluster(t, ns)
	cli := &shellv1alpha1.ShellJob{
		ObjectMeta: metav1.ObjectMeta{Name: "cli", Namespace: ns},
		Spec:       shellv1alpha1.ShellJobSpec{Command: "echo from the cli", Origin: shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginCLI, User: "me"}},
	}
	if err := person(t, "me").Create(ctx, cli); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := admin(c, ada).Submit(ctx, "", telegramSpec(fmt.Sprint("echo ", i), ada), nil); err != nil {
			t.Fatal(err)
		}
	}
	all := listWhen(t, c, func(all []shellv1alpha1.ShellJob) bool { return len(all) == 5 })
	for _, sj := range all {
		if !strings.HasPrefix(sj.Spec.Command, "echo ") || sj.ManagedFields != nil {
			t.Errorf("bot job %s: command %q, managed fields %d", sj.Name, sj.Spec.Command, len(sj.ManagedFields))
		}
	}
	var cached shellv1alpha1.ShellJob
	if err := c.Cache.Get(ctx, client.ObjectKeyFromObject(cli), &cached); err != nil {
		t.Fatal(err)
	}
	if cached.Spec.Command != "" || cached.Spec.Origin.User != "me" || cached.UID != cli.UID {
		t.Errorf("cached CLI job = %+v", cached)
	}
}

// A create that timed out but was carried out gives the job, as if it had
// answered: the bot follows it rather than say the command did not start.
// One that timed out and was not carried out is an error.
func TestSubmitTimedOut(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	botConfig := installChart(t, ns)
	c := botCluster(t, botConfig, ns)
	for name, made := range map[string]bool{"carried out": true, "not carried out": false} {
		t.Run(name, func(t *testing.T) {
			// The admins' requests reach the API server as the bot's do,
			// but a create answers a timeout, carried out or not.
			cfg := rest.CopyConfig(botConfig)
			cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
				return roundTripFunc(func(req *http.Request) (*http.Response, error) {
					if req.Method != http.MethodPost || !strings.HasSuffix(req.URL.Path, "/shelljobs") {
						return rt.RoundTrip(req)
					}
					if made {
						resp, err := rt.RoundTrip(req)
						if err != nil {
							return nil, err
						}
						_ = resp.Body.Close()
					}
					return timeout(req), nil
				})
			}
			timedOut := &kube.Cluster{Client: c.Client, Namespace: ns, Cache: c.Cache,
				People: kube.NewPeople(cfg, client.Options{Scheme: env.Scheme, Mapper: env.Client.RESTMapper()})}
			jobName := "tg-timeout-" + strings.ReplaceAll(name, " ", "-")
			sj, err := admin(timedOut, ada).Submit(ctx, jobName, telegramSpec("echo once", ada), nil)
			switch {
			case made && (err != nil || sj.Name != jobName || sj.UID == ""):
				t.Errorf("Submit = %+v, %v; want the job made", sj, err)
			case !made && !apierrors.IsTimeout(err):
				t.Errorf("Submit = %v, want the timeout", err)
			}
		})
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// timeout is the API server's answer to a request that timed out.
func timeout(req *http.Request) *http.Response {
	body, _ := json.Marshal(apierrors.NewTimeoutError("the create timed out", 1).Status())
	return &http.Response{StatusCode: http.StatusGatewayTimeout, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader(body)), Request: req}
}
