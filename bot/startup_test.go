package bot_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/bot"
	"shelljob.dev/shelljob/bot/tgclient"
)

// slowList holds the bot's startup (its List of undelivered jobs) while
// a test sends messages.
type slowList struct {
	bot.Cluster
	mu     sync.Mutex
	hold   bool
	listed chan struct{}
	go_    chan struct{}
}

func (s *slowList) List(ctx context.Context) ([]shellv1alpha1.ShellJob, error) {
	s.mu.Lock()
	hold := s.hold
	s.hold = false
	s.mu.Unlock()
	if hold {
		close(s.listed)
		<-s.go_
	}
	return s.Cluster.List(ctx)
}

// A message that arrives while a restarted bot starts up, before its
// updates manager runs, is answered once: not also when the manager
// fetches what the bot missed since its saved state (the command would
// run twice).
func TestMessageDuringStartupAnsweredOnce(t *testing.T) {
	sl := &slowList{listed: make(chan struct{}), go_: make(chan struct{})}
	state := &tgclient.ConfigMapState{Client: fake.NewClientBuilder().Build(), Name: types.NamespacedName{Namespace: "ns", Name: "updates"}}
	if err := state.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOptions{
		state: state,
		wrap:  func(c bot.Cluster) bot.Cluster { sl.Cluster = c; return sl },
	})
	chat := e.admin.Private()
	since := e.srv.Seq()
	m := e.send(e.admin, chat, ".a echo before")
	e.wait(since, "the first reply", sendTo(chat, m.ID))

	sl.mu.Lock()
	sl.hold = true
	sl.mu.Unlock()
	restarted := make(chan struct{})
	go func() { defer close(restarted); e.restart() }()
	select {
	case <-sl.listed:
	case <-time.After(time.Minute):
		t.Fatal("the restarted bot never listed its jobs")
	}
	since = e.srv.Seq()
	m = e.send(e.admin, chat, ".a echo during")
	close(sl.go_)
	<-restarted
	e.wait(since, "the reply", sendTo(chat, m.ID))
	// A second answer would follow the manager's startup getDifference.
	time.Sleep(3 * time.Second)
	if n := len(e.srv.Log().After(since).Filter(sendTo(chat, m.ID))); n != 1 {
		t.Errorf("%d replies to one command sent during the startup", n)
	}
}

// loadedState is an updates state loaded from c's ConfigMap.
func loadedState(t *testing.T, c client.Client) *tgclient.ConfigMapState {
	t.Helper()
	st := &tgclient.ConfigMapState{Client: c, Name: types.NamespacedName{Namespace: "ns", Name: "updates"}}
	if err := st.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	return st
}

// A restarted bot whose saved updates position is older than a command it
// handled is sent that command again: its job exists, and the command
// neither runs nor is answered a second time.
func TestReplayedCommandRunsOnce(t *testing.T) {
	c := fake.NewClientBuilder().Build()
	state := loadedState(t, c)
	e := newEnv(t, envOptions{state: state})
	if err := state.Flush(e.ctx); err != nil {
		t.Fatal(err)
	}
	chat := e.admin.Private()
	since := e.srv.Seq()
	m := e.send(e.admin, chat, ".a echo once")
	e.wait(since, "the final", sendTo(chat, m.ID))
	// A crash before this would send the final again (delivery is at least
	// once); this test is about the command.
	e.annotated(jobOf(m), shellv1alpha1.AnnotationDelivered, "")

	// The position saved before the command: a crash before the next flush.
	e.opts.state = loadedState(t, c)
	e.restart()
	later := e.send(e.admin, chat, ".a echo later")
	e.wait(since, "the next final", sendTo(chat, later.ID))
	time.Sleep(time.Second)
	if n := len(e.srv.Log().After(since).Filter(sendTo(chat, m.ID))); n != 1 {
		t.Errorf("%d replies to one command replayed after a restart", n)
	}
	if all, err := e.kube.List(e.ctx); err != nil || len(all) != 2 {
		t.Errorf("%d jobs for two commands (%v)", len(all), err)
	}
}

// The updates position is written once the client is done, after the
// shutdown window, without waiting for the next periodic flush: a restart
// does not fetch again the commands handled meanwhile.
func TestUpdatesStateSavedAtTheEnd(t *testing.T) {
	c := fake.NewClientBuilder().Build()
	state := loadedState(t, c)
	e := newEnv(t, envOptions{state: state})
	chat := e.admin.Private()
	since := e.srv.Seq()
	m := e.send(e.admin, chat, ".a echo hi")
	e.wait(since, "the final", sendTo(chat, m.ID))
	// Nothing is left for the next bot to send, which would move the state.
	e.annotated(jobOf(m), shellv1alpha1.AnnotationDelivered, "")
	e.restart()
	want, _, _ := state.GetState(e.ctx, e.srv.BotID())
	got, ok, err := loadedState(t, c).GetState(e.ctx, e.srv.BotID())
	if err != nil || !ok || got.Pts != want.Pts {
		t.Errorf("saved state = %+v (found %v, %v), want pts %d", got, ok, err, want.Pts)
	}
}
