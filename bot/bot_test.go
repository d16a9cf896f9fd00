package bot_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/gotd/td/telegram/updates"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/bot"
	"shelljob.dev/shelljob/bot/kube"
	"shelljob.dev/shelljob/bot/settings"
	"shelljob.dev/shelljob/bot/tgclient"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/charttest"
	"shelljob.dev/shelljob/internal/clustertest"
	"shelljob.dev/shelljob/internal/faketg"
	"shelljob.dev/shelljob/internal/identity"
	"shelljob.dev/shelljob/internal/streamclient"
	"shelljob.dev/shelljob/internal/testenv"
)

// apiServer is envtest's, shared by the tests.
var apiServer *testenv.Env

func TestMain(m *testing.M) { clustertest.Main(m, &apiServer) }

// env is a bot under test: the fake Telegram, and the real operator with
// real agents on envtest (clustertest), with the bot between them,
// connected over real MTProto, the Kubernetes API and the stream API that
// the operator serves. The chart's ServiceAccounts, RBAC and admission
// policies are installed on the test's namespace (charttest): the bot
// reaches the API server and the stream API with its ServiceAccount's
// token, and acts for each admin by impersonating the identity the chart
// maps them to, as in production.
type env struct {
	t       *testing.T
	ctx     context.Context
	srv     *faketg.Server
	cluster *clustertest.Cluster
	// kube is the bot's way to the cluster, as in production.
	kube *kube.Cluster
	// chart is the chart's access installed on the cluster's namespace,
	// identities what its ConfigMap tells the bot.
	chart      *charttest.Installed
	identities *identity.Mapping
	store      *settings.MemoryStore
	bot        *bot.Bot
	admin      *faketg.User
	other      *faketg.User
	group      *faketg.Chat
	stop       func()
	// restart stops the bot without a shutdown, as a crash would, and
	// starts a new one on the same cluster and settings.
	restart func()
	opts    envOptions
}

// startBot starts a bot and its client, and returns what stops them.
func (e *env) startBot() func() {
	t := e.t
	var cluster bot.Cluster = e.kube
	if e.opts.wrap != nil {
		cluster = e.opts.wrap(e.kube)
	}
	e.bot = bot.New(bot.Config{Admins: e.srv.Admins(), Identities: e.identities, Streaming: !e.opts.streamingOff, Clock: e.opts.clock, Log: testr.New(t), Files: e.opts.files, OutputMemory: e.opts.outputMemory}, nil, cluster, e.store)
	copts := e.srv.ClientOptions()
	ready := make(chan struct{})
	var once sync.Once
	client := tgclient.New(e.bot, tgclient.Options{
		Token: e.srv.BotToken(), AppID: 17349, AppHash: "test",
		DC: copts.DC, DCList: copts.DCList, PublicKeys: copts.PublicKeys, Log: testr.New(t),
		Ready: func() { once.Do(func() { close(ready) }) },
		State: e.opts.state,
	})
	var tg bot.Telegram = client.API
	if e.opts.wrapTG != nil {
		tg = e.opts.wrapTG(tg)
	}
	e.bot.SetTelegram(tg)
	runCtx, stopRun := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	b := e.bot
	go func() { done <- client.Run(runCtx, b) }()
	if err := e.srv.WaitConnected(e.ctx); err != nil {
		t.Fatal(err)
	}
	// Updates pushed before the updates manager has its state may be
	// dropped; wait until it takes them.
	select {
	case <-ready:
	case <-e.ctx.Done():
		t.Fatal("the bot never got ready")
	}
	return func() {
		stopRun()
		<-done
		b.Wait()
		if n := b.Followers().Len(); n != 0 {
			t.Errorf("%d output followers run after the bot's Wait", n)
		}
	}
}

type envOptions struct {
	streamingOff bool
	workers      int
	tg           faketg.Options
	// wrap, when set, puts a layer between the bot and the cluster.
	wrap func(bot.Cluster) bot.Cluster
	// clock, when set, is the bot's clock.
	clock clock.WithTicker
	// state, when set, is the updates state, kept across restarts.
	state updates.StateStorage
	// files are the bot's file limits.
	files bot.FileLimits
	// wrapTG, when set, puts a layer between the bot and Telegram.
	wrapTG func(bot.Telegram) bot.Telegram
	// streamIdle, when set, is the bot's idle limit of a stream of the
	// stream API.
	streamIdle time.Duration
	// streamAgent, when set, puts a layer between the stream API's server
	// and the agents.
	streamAgent func(agentapi.Client) agentapi.Client
	// outputMemory is the bot's Config.OutputMemory.
	outputMemory int64
	// pools are more pools beside the bot's (shell).
	pools []*shellv1alpha1.ShellPool
	// users, when set, adds the test's users and chats to the fake before
	// the chart is installed (its admins are the fake's).
	users func(e *env)
	// values, when set, are chart values over the admins, from the
	// fake's users and chats: bot.identities, bot.chats, pools' rights.
	values func(e *env) map[string]any
}

func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	srv, err := faketg.New(o.tg)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ctx: ctx, srv: srv, opts: o}
	e.admin = srv.NewUser(faketg.UserOptions{FirstName: "Ada", Admin: true})
	e.other = srv.NewUser(faketg.UserOptions{FirstName: "Eve"})
	e.group = srv.NewSupergroup("ops")
	if o.users != nil {
		o.users(e)
	}
	e.cluster = clustertest.Start(t, apiServer, clustertest.Options{Workers: int32(o.workers), StreamIdle: o.streamIdle,
		StreamAgent: o.streamAgent, Pools: o.pools, WorkersApart: true})
	e.kube = e.botCluster()
	e.store = &settings.MemoryStore{Log: testr.New(t)}
	stopBot := e.startBot()
	e.stop = func() {
		stopBot()
		_ = srv.Close()
		cancel()
	}
	e.restart = func() {
		stopBot()
		stopBot = e.startBot()
	}
	t.Cleanup(e.stop)
	return e
}

// botCluster installs the chart's access on the cluster's namespace, with
// the fake's admins, and returns the bot's way to the cluster: its
// ServiceAccount, and the admins' identities it impersonates.
func (e *env) botCluster() *kube.Cluster {
	t := e.t
	values := map[string]any{}
	if e.opts.values != nil {
		values = e.opts.values(e)
	}
	bot, _ := values["bot"].(map[string]any)
	if bot == nil {
		bot = map[string]any{}
		values["bot"] = bot
	}
	bot["admins"] = e.srv.Admins()
	e.chart = charttest.Install(t, apiServer.Config, apiServer.Client, e.cluster.Namespace, values)
	e.chart.WaitPolicies(t, apiServer.Client, e.admin.ID, e.cluster.Pool)
	e.identities = e.chart.Identities(t)
	cfg := e.chart.Bot(t)
	options := client.Options{Scheme: apiServer.Scheme, Mapper: apiServer.Client.RESTMapper()}
	c, err := client.New(cfg, options)
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := kube.StartCache(t.Context(), cfg, apiServer.Scheme, e.cluster.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := streamclient.New(e.cluster.Stream.Config(cfg),
		streamclient.Options{Namespace: e.cluster.Namespace, StreamIdle: e.opts.streamIdle, Clock: e.opts.clock})
	if err != nil {
		t.Fatal(err)
	}
	return &kube.Cluster{Client: c, Namespace: e.cluster.Namespace, Stream: stream, Cache: jobs, People: kube.NewPeople(cfg, options), Identities: e.identities}
}

// send sends text as u in chat and returns the message.
func (e *env) send(u *faketg.User, chat *faketg.Chat, text string) faketg.Message {
	e.t.Helper()
	m, err := u.Send(e.ctx, chat, text)
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

// wait waits for an event after since that matches.
func (e *env) wait(since int, what string, match func(faketg.Event) bool) faketg.Event {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	ev, err := e.srv.WaitEvent(ctx, since, match)
	if err != nil {
		e.t.Fatalf("waiting for %s: %v", what, err)
	}
	return ev
}

func sendTo(chat *faketg.Chat, reply int) func(faketg.Event) bool {
	return func(ev faketg.Event) bool {
		return ev.Kind == faketg.Send && ev.Chat == chat && ev.ReplyTo == reply && ev.OK()
	}
}

func TestQuickCommandOneReply(t *testing.T) {
	e := newEnv(t, envOptions{})
	since := e.srv.Seq()
	m := e.send(e.admin, e.group, ".a echo hi")
	ev := e.wait(since, "the final", sendTo(e.group, m.ID))
	if ev.Text != "hi" || ev.Silent || !ev.NoWebpage {
		t.Errorf("final = %q silent=%v nowebpage=%v", ev.Text, ev.Silent, ev.NoWebpage)
	}
	time.Sleep(300 * time.Millisecond)
	if l := e.srv.Log().After(since).Of(faketg.Edit, faketg.Draft, faketg.Delete); len(l) != 0 {
		t.Errorf("a quick command made preview calls: %v", l)
	}
	if cmds := e.srv.BotCommands(); len(cmds) != 2 || cmds[0].Command != "help" || cmds[1].Command != "settings" {
		t.Errorf("command menu = %v", cmds)
	}
}

// TestDeliveredJobSettles: once its final is delivered, a job settles:
// the operator labels it, which the chart's admission lets only the
// operator's ServiceAccount do.
func TestDeliveredJobSettles(t *testing.T) {
	e := newEnv(t, envOptions{})
	since := e.srv.Seq()
	m := e.send(e.admin, e.group, ".a echo hi")
	e.wait(since, "the final", sendTo(e.group, m.ID))
	var labels map[string]string
	err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		var list shellv1alpha1.ShellJobList
		if err := apiServer.Client.List(ctx, &list, client.InNamespace(e.cluster.Namespace)); err != nil || len(list.Items) != 1 {
			return false, err
		}
		labels = list.Items[0].Labels
		return labels[shellv1alpha1.LabelExpires] != "", nil
	})
	if err != nil {
		t.Fatalf("the delivered job did not settle: %v; its labels %v", err, labels)
	}
}

func TestEmptyOutputAndNonAdmin(t *testing.T) {
	e := newEnv(t, envOptions{})
	since := e.srv.Seq()
	e.send(e.other, e.group, ".a echo nope")
	m := e.send(e.admin, e.group, ".a exit 3")
	ev := e.wait(since, "the final", sendTo(e.group, m.ID))
	if ev.Text != "The process exited 3." {
		t.Errorf("final = %q", ev.Text)
	}
	if l := e.srv.Log().After(since).Of(faketg.Send).Texts(); len(l) != 1 {
		t.Errorf("a non-admin got an answer: %q", l)
	}
}

func TestGroupPreviewEditedIntoFinal(t *testing.T) {
	e := newEnv(t, envOptions{})
	since := e.srv.Seq()
	m := e.send(e.admin, e.group, ".a echo start; sleep 3; echo end")
	pv := e.wait(since, "the preview", sendTo(e.group, m.ID))
	if !strings.HasPrefix(pv.Text, "⏳ #1\n\nstart\n") || !strings.HasSuffix(pv.Text, "▌") || !pv.Silent || !pv.NoWebpage {
		t.Errorf("preview = %q silent=%v", pv.Text, pv.Silent)
	}
	if len(pv.Buttons) != 1 || pv.Buttons[0][0].Text != "⏹ Stop" || string(pv.Buttons[0][0].Data) != "shk:1" {
		t.Errorf("preview buttons = %+v", pv.Buttons)
	}
	if d := pv.Time.Sub(m.Date); d < 1900*time.Millisecond {
		t.Errorf("preview after %v, want ≥ 2s", d)
	}
	fin := e.wait(pv.Seq, "the final edit", func(ev faketg.Event) bool {
		return ev.Kind == faketg.Edit && ev.MsgID == pv.MsgID && !strings.HasSuffix(ev.Text, "▌")
	})
	if fin.Text != "start\nend" || fin.HasMarkup {
		t.Errorf("final = %q markup=%v", fin.Text, fin.HasMarkup)
	}
}

func TestPrivateDraftThenReply(t *testing.T) {
	e := newEnv(t, envOptions{})
	chat := e.admin.Private()
	since := e.srv.Seq()
	m := e.send(e.admin, chat, ".a echo a; sleep 3; echo b")
	d := e.wait(since, "the draft", func(ev faketg.Event) bool { return ev.Kind == faketg.Draft && ev.OK() })
	if !strings.HasPrefix(d.Text, "⏳ #1\n\na\n") || !d.Draft.CanStop {
		t.Errorf("draft = %q can_stop=%v", d.Text, d.Draft.CanStop)
	}
	fin := e.wait(d.Seq, "the final", sendTo(chat, m.ID))
	if fin.Text != "a\nb" {
		t.Errorf("final = %q", fin.Text)
	}
	sync, ok := e.srv.Log().After(d.Seq).Of(faketg.Draft).Filter(func(ev faketg.Event) bool { return ev.Seq < fin.Seq }).Last()
	if !ok || sync.Text != "a\nb" {
		t.Errorf("no sync draft before the reply: %+v", sync)
	}
}

func TestKillForms(t *testing.T) {
	e := newEnv(t, envOptions{})
	since := e.srv.Seq()
	k := e.send(e.admin, e.group, ".k")
	if ev := e.wait(since, ".k reply", sendTo(e.group, k.ID)); ev.Text != "No running command here." {
		t.Errorf(".k alone = %q", ev.Text)
	}
	a1 := e.send(e.admin, e.group, ".a sleep 30")
	a2 := e.send(e.admin, e.group, ".a sleep 30")
	// .k lists the jobs by number: the previews show the bot has both.
	e.preview(since, e.group, a1.ID)
	e.preview(since, e.group, a2.ID)
	k = e.send(e.admin, e.group, ".k")
	if ev := e.wait(since, ".k list", sendTo(e.group, k.ID)); !strings.Contains(ev.Text, "#1 ·") || !strings.Contains(ev.Text, "#2 ·") {
		t.Errorf(".k with two = %q", ev.Text)
	}
	k = e.send(e.admin, e.group, ".k 3 5")
	if ev := e.wait(since, "usage", sendTo(e.group, k.ID)); !strings.HasPrefix(ev.Text, "Usage: .k") {
		t.Errorf(".k 3 5 = %q", ev.Text)
	}
	k = e.send(e.admin, e.group, ".k ls")
	if ev := e.wait(since, "ls", sendTo(e.group, k.ID)); !strings.Contains(ev.Text, "sleep 30") {
		t.Errorf(".k ls = %q", ev.Text)
	}
	k = e.send(e.admin, e.group, ".k #1")
	if ev := e.wait(since, "stop 1", sendTo(e.group, k.ID)); ev.Text != "⏹ Stopping #1…" {
		t.Errorf(".k #1 = %q", ev.Text)
	}
	fin := e.final(since, e.group, a1.ID)
	if fin.Text != "The process exited 130.\n\n⏹ Stopped (exit 130)." {
		t.Errorf("final of a stopped job = %q", fin.Text)
	}
	k = e.send(e.admin, e.group, ".k 1")
	if ev := e.wait(since, "gone", sendTo(e.group, k.ID)); ev.Text != "No running command #1 here." {
		t.Errorf(".k 1 again = %q", ev.Text)
	}
	k = e.send(e.admin, e.group, ".k all")
	if ev := e.wait(since, "all", sendTo(e.group, k.ID)); ev.Text != "⏹ Stopping #2…" {
		t.Errorf(".k all = %q", ev.Text)
	}
	e.final(since, e.group, a2.ID)
}
