package bot_test

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/faketg"
	"shelljob.dev/shelljob/internal/identity"
	"shelljob.dev/shelljob/internal/shelljob"
	utiltesting "shelljob.dev/shelljob/internal/testing"
	"shelljob.dev/shelljob/internal/texts"
)

// The people in the chat, on envtest with the chart's RBAC and
// admission policies: alice, bob and dave are chat admins the chart maps
// to the Kubernetes users of those names; carol is a CLI user.
//
//   - alice and bob may use dev, bob may stop others' jobs there; carol
//     may use dev too;
//   - bob may use prod and hasty, and approve on prod; dave approves on
//     prod and hasty;
//   - the groups "dev", "prod" and "hasty" run on the pool of their name,
//     "lab" on dev; hasty's approvals are asked in the group "approvers".
//
// dev caps each person at one running job (maxRunningPerUser); prod and
// hasty require approval, hasty within hastyTimeout.
type accessEnv struct {
	*env
	alice, bob, dave      *faketg.User
	dev, prod, hasty, lab *faketg.Chat
	// approvers is hasty's approvers' chat.
	approvers *faketg.Chat
}

const hastyTimeout = 3 * time.Second

func newAccessEnv(t *testing.T) *accessEnv {
	a := &accessEnv{}
	hasty := utiltesting.MakeShellPool("hasty", "").Replicas(1).Approval(int32(hastyTimeout / time.Second)).Obj()
	a.env = newEnv(t, envOptions{
		workers: 1,
		pools: []*shellv1alpha1.ShellPool{
			utiltesting.MakeShellPool("dev", "").Replicas(2).MaxRunningPerUser(1).Obj(),
			utiltesting.MakeShellPool("prod", "").Replicas(1).Approval(600).Obj(),
			hasty,
		},
		users: func(e *env) {
			a.approvers = e.srv.NewSupergroup("approvers")
			hasty.Spec.Approval.Chat = a.approvers.BotAPIID()
			a.alice = e.srv.NewUser(faketg.UserOptions{FirstName: "Alice", Admin: true})
			a.bob = e.srv.NewUser(faketg.UserOptions{FirstName: "Bob", Admin: true})
			a.dave = e.srv.NewUser(faketg.UserOptions{FirstName: "Dave", Admin: true})
			a.dev, a.prod, a.hasty, a.lab = e.srv.NewSupergroup("dev"), e.srv.NewSupergroup("prod"), e.srv.NewSupergroup("hasty"), e.srv.NewSupergroup("lab")
		},
		values: func(*env) map[string]any {
			users := func(names ...string) map[string]any { return map[string]any{"users": names} }
			return map[string]any{
				"bot": map[string]any{
					"identities": []any{
						map[string]any{"telegramUser": a.alice.ID, "user": "alice"},
						map[string]any{"telegramUser": a.bob.ID, "user": "bob"},
						map[string]any{"telegramUser": a.dave.ID, "user": "dave"},
					},
					"chats": []any{
						map[string]any{"chat": a.dev.BotAPIID(), "pool": "dev"},
						map[string]any{"chat": a.prod.BotAPIID(), "pool": "prod"},
						map[string]any{"chat": a.hasty.BotAPIID(), "pool": "hasty"},
						map[string]any{"chat": a.lab.BotAPIID(), "pool": "dev"},
					},
				},
				"pools": map[string]any{
					"dev":   map[string]any{"users": []string{"alice", "bob", "carol"}, "stop": users("bob")},
					"prod":  map[string]any{"users": []string{"bob"}, "approve": users("bob", "dave")},
					"hasty": map[string]any{"users": []string{"bob"}, "approve": users("dave")},
				},
			}
		},
	})
	return a
}

// job reads the ShellJob of command message m, under its name or one
// with a suffix.
func (a *accessEnv) job(chat *faketg.Chat, m faketg.Message) *shellv1alpha1.ShellJob {
	a.t.Helper()
	var list shellv1alpha1.ShellJobList
	if err := a.cluster.Client.List(a.ctx, &list, client.InNamespace(a.cluster.Namespace)); err != nil {
		a.t.Fatal(err)
	}
	for i := range list.Items {
		o := list.Items[i].Spec.Origin
		if o.Source == shellv1alpha1.OriginTelegram && o.Chat == chat.BotAPIID() && o.Message == int64(m.ID) &&
			strings.HasPrefix(list.Items[i].Name, shelljob.TelegramName(o, m.Date)) {
			return &list.Items[i]
		}
	}
	a.t.Fatalf("no job of message %d of %s", m.ID, chat)
	return nil
}

// answer waits for the bot's reply to m that is no preview, no approval
// message: a .k's, a .x's, a refusal, or a quick command's final.
func (a *accessEnv) answer(since int, chat *faketg.Chat, m faketg.Message) faketg.Event {
	a.t.Helper()
	return a.wait(since, "the answer", func(ev faketg.Event) bool {
		return sendTo(chat, m.ID)(ev) && !strings.HasSuffix(ev.Text, "▌") && !isApprovalMessage(ev)
	})
}

// finalOf waits for the final of command m: its reply that is no approval
// message, or the last edit of its preview.
func (a *accessEnv) finalOf(since int, chat *faketg.Chat, m faketg.Message) faketg.Event {
	a.t.Helper()
	ev := a.wait(since, "the reply", func(ev faketg.Event) bool { return sendTo(chat, m.ID)(ev) && !isApprovalMessage(ev) })
	if !strings.HasSuffix(ev.Text, "▌") {
		return ev
	}
	return a.lastEdit(ev.Seq, chat, ev.MsgID)
}

// lastEdit waits for the edit of preview id of chat into a final. Message
// ids are a chat's own: the tests' other chats have the same.
func (a *accessEnv) lastEdit(since int, chat *faketg.Chat, id int) faketg.Event {
	a.t.Helper()
	return a.wait(since, "the final edit", func(ev faketg.Event) bool {
		return ev.Kind == faketg.Edit && ev.Chat == chat && ev.MsgID == id && !strings.HasSuffix(ev.Text, "▌") && ev.OK()
	})
}

func isApprovalMessage(ev faketg.Event) bool {
	return len(ev.Buttons) > 0 && len(ev.Buttons[0]) > 0 && bytes.HasPrefix(ev.Buttons[0][0].Data, []byte("sha:"))
}

// TestChatAccess: alice's command runs on the dev group's pool as alice;
// on prod it is refused in the policy's words, as her .x on dev is. With
// dev's one running job a person, her second command waits and says so,
// while bob's runs beside it. dave may not stop her job, and is told whose
// it is; bob may, and the job names him as its stopper. carol's objects
// under the next names of a group's jobs are never taken for alice's
// command: it runs under another name, and nothing of carol's is shown.
func TestChatAccess(t *testing.T) {
	a := newAccessEnv(t)

	// Squatting: carol plants jobs under the names of the lab group's next
	// command, for the seconds around now.
	carol := a.cli(t, "carol")
	plan := a.send(a.alice, a.lab, "plans")
	next := plan.ID + 1
	origin := shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginTelegram, Chat: a.lab.BotAPIID(), Message: int64(next)}
	now := time.Now()
	for d := -2; d <= 8; d++ {
		sq := &shellv1alpha1.ShellJob{
			ObjectMeta: metav1.ObjectMeta{Namespace: a.cluster.Namespace, Name: shelljob.TelegramName(origin, now.Add(time.Duration(d)*time.Second))},
			Spec: shellv1alpha1.ShellJobSpec{Command: "echo squatted", Pool: "dev", Mode: shellv1alpha1.ModeFork,
				Origin: shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginCLI, User: "carol"}},
		}
		if err := carol.Create(a.ctx, sq); err != nil {
			t.Fatalf("carol's job %s: %v", sq.Name, err)
		}
	}
	// alice's delivered job of the same message id and command, an hour
	// ago: a message of another Telegram's life (a test Telegram that
	// restarted counts its ids from 1 again), which must not stand for the
	// command.
	earlier := &shellv1alpha1.ShellJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: a.cluster.Namespace, Name: shelljob.TelegramName(origin, now.Add(-time.Hour)) + "-older",
			Annotations: map[string]string{shellv1alpha1.AnnotationDelivered: now.Add(-time.Hour).UTC().Format(time.RFC3339)}},
		Spec: shellv1alpha1.ShellJobSpec{Command: "echo mine", Pool: "dev", Mode: shellv1alpha1.ModeFork, Origin: origin, Stop: true},
	}
	earlier.Spec.Origin.User, earlier.Spec.Origin.TelegramUser = "alice", a.alice.ID
	if err := a.asSender("alice", a.alice.ID).Create(a.ctx, earlier); err != nil {
		t.Fatalf("alice's earlier job %s: %v", earlier.Name, err)
	}
	since := a.srv.Seq()
	m := a.send(a.alice, a.lab, ".a echo mine")
	if m.ID != next {
		t.Fatalf("the command is message %d, not the planted %d", m.ID, next)
	}
	// The chat is told, then the command runs as alice under a new name.
	taken := a.answer(since, a.lab, m)
	if ev := a.finalOf(taken.Seq, a.lab, m); ev.Text != "mine" {
		t.Errorf("final = %q, want mine", ev.Text)
	}
	mine := a.job(a.lab, m)
	if got := mine.Spec.Origin; got.User != "alice" || got.TelegramUser != a.alice.ID {
		t.Errorf("alice's job %s has origin %+v", mine.Name, got)
	}
	planted := shelljob.TelegramName(mine.Spec.Origin, m.Date)
	if want := texts.JobNameTaken(planted, mine.Name); taken.Text != want || mine.Name == planted {
		t.Errorf("job %s; the chat was told %q, want %q", mine.Name, taken.Text, want)
	}
	for _, ev := range a.srv.Log().After(since).Of(faketg.Send, faketg.Edit) {
		if ev.Chat == a.lab && strings.Contains(ev.Text, "squatted") {
			t.Errorf("carol's output reached the chat: %q", ev.Text)
		}
	}

	// alice on dev, as alice.
	since = a.srv.Seq()
	first := a.send(a.alice, a.dev, ".a echo tick; sleep 60")
	pv := a.preview(since, a.dev, first.ID)
	sj := a.job(a.dev, first)
	if sj.Spec.Pool != "dev" || sj.Spec.Origin.User != "alice" || sj.Spec.Origin.TelegramUser != a.alice.ID {
		t.Errorf("alice's job: pool %q, origin %+v", sj.Spec.Pool, sj.Spec.Origin)
	}
	n := sj.Status.Number

	// Her second waits for her first; bob's runs beside it.
	since = a.srv.Seq()
	second := a.send(a.alice, a.dev, ".a echo second")
	waiting := a.wait(since, "the second's preview", func(ev faketg.Event) bool {
		return (ev.Kind == faketg.Send || ev.Kind == faketg.Edit) && ev.Chat == a.dev && strings.Contains(ev.Text, texts.WaitingOwn(1))
	})
	if !strings.HasPrefix(waiting.Text, texts.HeaderWaitingOwn(a.job(a.dev, second).Status.Number, 1)) {
		t.Errorf("the second's preview = %q", waiting.Text)
	}
	since = a.srv.Seq()
	beside := a.send(a.bob, a.dev, ".a echo beside")
	if ev := a.finalOf(since, a.dev, beside); ev.Text != "beside" {
		t.Errorf("bob's final = %q", ev.Text)
	}

	// dave may not stop alice's job; bob may.
	want := texts.StopRefused(n, sj.Name, num(n)+" is alice's job; you may not stop others' jobs on pool dev")
	if got := a.answerTo(a.dave, a.dev, first.ID, ".k"); got != want {
		t.Errorf("dave's .k = %q, want %q", got, want)
	}
	if got := a.answerTo(a.bob, a.dev, first.ID, ".k"); got != shelljob.StopSent.Text(n) {
		t.Errorf("bob's .k = %q", got)
	}
	if fin := a.lastEdit(pv.Seq, a.dev, pv.MsgID); fin.Text != "tick\n\n"+texts.StoppedNote(130) {
		t.Errorf("alice's final = %q", fin.Text)
	}
	if sj := a.job(a.dev, first); sj.Spec.StopBy != "bob" {
		t.Errorf("stopBy = %q, want bob", sj.Spec.StopBy)
	}
	if ev := a.lastEdit(waiting.Seq, a.dev, waiting.MsgID); ev.Text != "second" {
		t.Errorf("the second's final = %q", ev.Text)
	}

	// alice may not run on prod, nor restart dev.
	if got := a.answerTo(a.alice, a.prod, 0, ".a echo no"); got != "You may not run commands on pool prod." {
		t.Errorf("alice on prod = %q", got)
	}
	if got := a.answerTo(a.alice, a.dev, 0, ".x"); got != "You may not restart pool dev." {
		t.Errorf("alice's .x = %q", got)
	}
}

// TestChatApproval: bob's command on prod waits for approval, and the bot
// asks for it in the group, with buttons; alice may not decide, nor bob on
// his own job, and the toast says why; dave approves it as dave, and it
// runs. A job dave denies and one no one decides on in time never run, and
// their finals say why; hasty's approvals are asked in its approvers'
// chat.
func TestChatApproval(t *testing.T) {
	a := newAccessEnv(t)

	since := a.srv.Seq()
	m := a.send(a.bob, a.prod, ".a echo approved")
	ask := a.wait(since, "the approval message", func(ev faketg.Event) bool {
		return sendTo(a.prod, m.ID)(ev) && isApprovalMessage(ev)
	})
	sj := a.job(a.prod, m)
	n := sj.Status.Number
	if want := texts.ApprovalAsked(n, "prod", "bob", "echo approved"); ask.Text != want {
		t.Errorf("approval message = %q, want %q", ask.Text, want)
	}
	approve, deny := ask.Buttons[0][0], ask.Buttons[0][1]
	if approve.Text != texts.ApproveButton || deny.Text != texts.DenyButton {
		t.Errorf("buttons %q, %q", approve.Text, deny.Text)
	}
	for _, tc := range []struct {
		who  *faketg.User
		want string
	}{
		{a.alice, "You may not approve or deny jobs on pool prod."},
		{a.bob, num(n) + " is your own job: someone else must approve or deny it"},
		{a.dave, "✅ Approved " + num(n) + "."},
		{a.dave, num(n) + " was already approved by dave."},
	} {
		ans, err := tc.who.Press(a.ctx, a.prod, ask.MsgID, approve.Data)
		if err != nil || ans.Text != tc.want {
			t.Errorf("%s's press = %q %v, want %q", tc.who.FirstName, ans.Text, err, tc.want)
		}
	}
	if ev := a.finalOf(since, a.prod, m); ev.Text != "approved" {
		t.Errorf("final = %q", ev.Text)
	}
	settled := a.wait(ask.Seq, "the settled approval message", func(ev faketg.Event) bool {
		return ev.Kind == faketg.Edit && ev.Chat == a.prod && ev.MsgID == ask.MsgID && ev.OK()
	})
	if want := texts.ApprovalSettled(texts.ApprovedNote("dave"), n, "prod", "bob", "echo approved"); settled.Text != want || len(settled.Buttons) != 0 {
		t.Errorf("settled = %q with %d button rows, want %q", settled.Text, len(settled.Buttons), want)
	}
	if d := a.job(a.prod, m).Spec.Approval; d == nil || d.By != "dave" || d.TelegramUser != a.dave.ID {
		t.Errorf("approval = %+v", d)
	}

	// Denied.
	since = a.srv.Seq()
	m = a.send(a.bob, a.prod, ".a echo never")
	ask = a.wait(since, "the approval message", func(ev faketg.Event) bool { return sendTo(a.prod, m.ID)(ev) && isApprovalMessage(ev) })
	n = a.job(a.prod, m).Status.Number
	if ans, err := a.dave.Press(a.ctx, a.prod, ask.MsgID, ask.Buttons[0][1].Data); err != nil || ans.Text != "⛔ Denied "+num(n)+"." {
		t.Errorf("dave's deny = %q %v", ans.Text, err)
	}
	if ev := a.finalOf(since, a.prod, m); ev.Text != texts.DeniedNote("dave") {
		t.Errorf("denied final = %q, want %q", ev.Text, texts.DeniedNote("dave"))
	}
	if a.job(a.prod, m).Status.Ran {
		t.Error("the denied job ran")
	}

	// Expired. hasty's approval is asked in its approvers' chat, which the
	// bot has seen a message from.
	a.send(a.dave, a.approvers, "ready to approve")
	since = a.srv.Seq()
	m = a.send(a.bob, a.hasty, ".a echo late")
	ask = a.wait(since, "the approval message", func(ev faketg.Event) bool {
		return ev.Kind == faketg.Send && ev.Chat == a.approvers && isApprovalMessage(ev) && ev.OK()
	})
	if ask.ReplyTo != 0 || ask.Text != texts.ApprovalAsked(a.job(a.hasty, m).Status.Number, "hasty", "bob", "echo late") {
		t.Errorf("approval message in the approvers' chat = %q, reply to %d", ask.Text, ask.ReplyTo)
	}
	if ev := a.finalOf(since, a.hasty, m); ev.Text != texts.ExpiredNote(hastyTimeout) {
		t.Errorf("expired final = %q, want %q", ev.Text, texts.ExpiredNote(hastyTimeout))
	}
	if a.job(a.hasty, m).Status.Ran {
		t.Error("the expired job ran")
	}
	a.wait(ask.Seq, "the settled approval message", func(ev faketg.Event) bool {
		return ev.Kind == faketg.Edit && ev.Chat == a.approvers && ev.MsgID == ask.MsgID && strings.HasPrefix(ev.Text, texts.ExpiredNote(hastyTimeout)) && ev.OK()
	})
	if ans, _ := a.dave.Press(a.ctx, a.approvers, ask.MsgID, ask.Buttons[0][0].Data); ans.Text == "" || strings.HasPrefix(ans.Text, "✅") {
		t.Errorf("a press after the expiry = %q", ans.Text)
	}
}

// num is how the chat names job n: "#3".
func num(n int64) string { return "#" + strconv.FormatInt(n, 10) }

// answerTo sends text as u in chat, in reply to message id when it is
// not 0, and returns the bot's answer (answer).
func (a *accessEnv) answerTo(u *faketg.User, chat *faketg.Chat, id int, text string) string {
	a.t.Helper()
	since := a.srv.Seq()
	m, err := u.In(chat).Reply(id).Text(a.ctx, text)
	if err != nil {
		a.t.Fatal(err)
	}
	return a.answer(since, chat, m).Text
}

// asSender is a client of the bot acting for the chat admin telegramUser
// mapped to the Kubernetes user name: what the bot's own client of a
// person is, made here with the API server's admin rights.
func (a *accessEnv) asSender(name string, telegramUser int64) client.Client {
	a.t.Helper()
	cfg := rest.CopyConfig(apiServer.Config)
	cfg.Impersonate = identity.Identity{TelegramUser: telegramUser, User: name, Groups: []string{identity.Group}}.Impersonation()
	c, err := client.New(cfg, client.Options{Scheme: apiServer.Scheme, Mapper: apiServer.Client.RESTMapper()})
	if err != nil {
		a.t.Fatal(err)
	}
	return c
}

// cli is a client of the CLI user name, who may create and read ShellJobs
// in the namespace (the rights on pools are the chart's).
func (a *accessEnv) cli(t *testing.T, name string) client.Client {
	t.Helper()
	ns := a.cluster.Namespace
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cli-" + name}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{shellv1alpha1.GroupVersion.Group}, Resources: []string{"shelljobs"}, Verbs: []string{"create", "get", "list", "watch"},
	}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cli-" + name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}}}
	for _, o := range []client.Object{role, binding} {
		if err := apiServer.Client.Create(a.ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	cfg := rest.CopyConfig(apiServer.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: name}
	c, err := client.New(cfg, client.Options{Scheme: apiServer.Scheme, Mapper: apiServer.Client.RESTMapper()})
	if err != nil {
		t.Fatal(err)
	}
	// RBAC takes the binding up at once; wait until it does all the same.
	ctx, cancel := context.WithTimeout(a.ctx, 30*time.Second)
	defer cancel()
	for {
		var list shellv1alpha1.ShellJobList
		err := c.List(ctx, &list, client.InNamespace(ns))
		if err == nil {
			return c
		}
		if ctx.Err() != nil {
			t.Fatalf("%s cannot list jobs: %v", name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
