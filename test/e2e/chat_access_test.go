//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	streamv1alpha1 "shelljob.dev/shelljob/api/stream/v1alpha1"
	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/faketg/control"
	sjutil "shelljob.dev/shelljob/internal/shelljob"
	"shelljob.dev/shelljob/internal/texts"
)

// The people in the chat, on kind: alice, bob and dave are chat
// admins of the fake, whom the chart (bot.identities) maps to the
// Kubernetes users of their names in the group e2e-people, with the rights
// of accessPools. The supergroup ops-super is the dev team's group (on
// e2e-dev), the forum ops-forum runs on e2e-prod, and bob's private chat
// with the bot on e2e-hasty. carol uses kubectl.

// daveID is dave's Telegram id (telegramIDs holds alice's and bob's).
const daveID = 333000333

// chatPeople are the chats of the people.
type chatPeople struct {
	// Dev is ops-super, seen by each of them.
	Dev map[string]Chat
	// Prod is ops-forum, seen by each of them.
	Prod map[string]Chat
	// BobPrivate is bob's private chat with the bot.
	BobPrivate Chat
}

// chatAccess gives the fake the chat admins, installs the chart
// with their identities and chats (rolled back when the test ends), and
// the test's pools and rights (accessPools).
func chatAccess(t *testing.T) chatPeople {
	t.Helper()
	accessPools(t)
	p := Chats(t)
	api := Telegram(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	info, err := api.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]int64{"alice": telegramIDs["alice"], "bob": telegramIDs["bob"], "dave": daveID}
	known := map[int64]control.User{}
	for _, u := range info.Users {
		known[u.ID] = u
	}
	for name, id := range ids {
		if _, ok := known[id]; ok {
			continue // a fake that served an earlier run has them
		}
		if _, err := api.NewUser(ctx, control.UserRequest{ID: id, FirstName: strings.ToUpper(name[:1]) + name[1:], Username: "e2e_" + name, Admin: true}); err != nil {
			t.Fatalf("the fake's user %s: %v", name, err)
		}
	}
	var dev, prod int64
	for _, c := range info.Chats {
		switch c.Title {
		case "ops-super":
			dev = c.ID
		case "ops-forum":
			prod = c.ID
		}
	}
	if dev == 0 || prod == 0 {
		t.Fatalf("the fake has no ops-super or ops-forum: %+v", info.Chats)
	}

	var history []struct {
		Revision int `json:"revision"`
	}
	if err := json.Unmarshal([]byte(helmRun(t, "history", "shelljob", "-n", Namespace, "-o", "json")), &history); err != nil || len(history) == 0 {
		t.Fatalf("helm history: %v", err)
	}
	revision := history[len(history)-1].Revision
	t.Cleanup(func() {
		dumpBotLog(t)
		helmRun(t, "rollback", "shelljob", strconv.Itoa(revision), "-n", Namespace, "--wait", "--timeout", "5m")
		rolloutStatus(t, BotDeployment)
	})
	identities, _ := json.Marshal([]map[string]any{
		{"telegramUser": ids["alice"], "user": "alice", "groups": []string{people}},
		{"telegramUser": ids["bob"], "user": "bob", "groups": []string{people}, "pool": hastyPool},
		{"telegramUser": ids["dave"], "user": "dave", "groups": []string{people}},
	})
	chats, _ := json.Marshal([]map[string]any{{"chat": dev, "pool": devPool}, {"chat": prod, "pool": prodPool}})
	admins := fmt.Sprintf("bot.admins={%d,%d,%d,%d}", p.Admin, ids["alice"], ids["bob"], ids["dave"])
	helmUpgrade(t, "--set", admins, "--set-json", "bot.identities="+string(identities), "--set-json", "bot.chats="+string(chats))
	rolloutStatus(t, BotDeployment)
	Chats(t) // the bot is connected again

	cp := chatPeople{Dev: map[string]Chat{}, Prod: map[string]Chat{}}
	for name, id := range ids {
		cp.Dev[name] = Chat{t: t, api: api, ID: dev, User: id}
		cp.Prod[name] = Chat{t: t, api: api, ID: prod, User: id}
	}
	cp.BobPrivate = Chat{t: t, api: api, ID: ids["bob"], User: ids["bob"]}
	return cp
}

// press presses the button of data on message msg of chat, as the chat's
// user, and returns the toast.
func (c Chat) press(msg int, data string) string {
	c.t.Helper()
	ctx, cancel := c.ctx(ReplyTimeout)
	defer cancel()
	ans, err := c.api.Press(ctx, control.PressRequest{User: c.User, Chat: c.ID, MsgID: msg, Data: &data})
	if err != nil {
		c.t.Fatalf("press %q on message %d: %v", data, msg, err)
	}
	return ans.Text
}

// approvalMessage waits for the bot's message that asks for the approval
// of command cmd's job, and returns it with its Approve and Deny data.
func (c Chat) approvalMessage(cmd control.Message) (control.Message, string, string) {
	c.t.Helper()
	m := c.WaitMessage(ReplyTimeout, "the approval message", func(m control.Message) bool {
		return botReply(m, cmd.ID) && len(m.Buttons) == 1 && len(m.Buttons[0]) == 2 && strings.HasPrefix(m.Buttons[0][0].Data, "sha:")
	})
	return m, m.Buttons[0][0].Data, m.Buttons[0][1].Data
}

// finalPast is the final of cmd, past the bot's other message about it
// (an approval message, settled into a final-like text, or a note).
func (c Chat) finalPast(cmd, other control.Message, timeout time.Duration) control.Message {
	c.t.Helper()
	return c.WaitMessage(timeout, "the final", func(m control.Message) bool {
		return IsFinalOf(cmd, m) && m.ID != other.ID
	})
}

// TestChatAccessCreateAndStop: alice's command in the dev team's group
// runs on e2e-dev as alice, as the audit log says; carol cannot stop it
// and is told whose it is; bob's .k stops it, as bob. alice's command in
// the prod group is refused in the chat with the policy's words. Jobs
// carol planted under the names of the group's next command never stand
// for it: alice's command runs under another name, and carol's output
// never reaches the chat.
func TestChatAccessCreateAndStop(t *testing.T) {
	cp := chatAccess(t)
	dev := cp.Dev["alice"]

	// carol plants jobs under the names of the group's next message, for
	// the seconds around now.
	ms := dev.Messages()
	next := 1
	if len(ms) > 0 {
		next = ms[len(ms)-1].ID + 1
	}
	origin := shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginTelegram, Chat: dev.ID, Message: int64(next)}
	now := time.Now()
	for d := -5; d <= 15; d++ {
		sq := chatJob(t, "carol", devPool, "echo squatted")
		sq.Name = sjutil.TelegramName(origin, now.Add(time.Duration(d)*time.Second))
		sq.Spec.Origin = shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginCLI, User: "carol"}
		if err := createAs(t, "carol", sq); err != nil {
			t.Fatalf("carol's job %s: %v", sq.Name, err)
		}
	}
	seq := dev.Seq()
	m := dev.Send(".a echo mine; sleep 300")
	if m.ID != next {
		t.Logf("the command is message %d, not %d: no name was squatted", m.ID, next)
	}
	dev.Preview(m, ReplyTimeout)
	j := JobOf(t, dev, m)
	if j.Spec.Pool != devPool || j.Spec.Origin.User != "alice" || j.Spec.Origin.TelegramUser != telegramIDs["alice"] {
		t.Errorf("alice's job %s: pool %q, origin %+v", j.Name, j.Spec.Pool, j.Spec.Origin)
	}
	audited(t, "create", j.Name, "alice", true)
	// The name carol took is told in the chat, with the one the command
	// runs under.
	var note control.Message
	if m.ID == next {
		note = dev.WaitMessage(ReplyTimeout, "the note of the taken name", func(x control.Message) bool {
			return botReply(x, m.ID) && strings.HasPrefix(x.Text, "⚠ The job name ")
		})
		if want := "The command runs as " + j.Name + "."; !strings.HasSuffix(note.Text, want) {
			t.Errorf("the note of the taken name %q does not end with %q", note.Text, want)
		}
	}

	r := shelljobAs(t, "carol", "stop", j.Name)
	if r.code != 1 || !strings.Contains(r.errOut, "is alice's job; you may not stop others' jobs on pool "+devPool) {
		t.Errorf("carol's stop: exit %d, stdout %q, stderr %q", r.code, r.out, r.errOut)
	}
	bob := cp.Dev["bob"]
	k := bob.Reply(m.ID, ".k")
	if got, want := bob.Answer(k), fmt.Sprintf("⏹ Stopping #%d…", j.Status.Number); got != want {
		t.Errorf("bob's .k = %q, want %q", got, want)
	}
	if fin := dev.finalPast(m, note, FinalTimeout); fin.Text != "mine\n\n"+texts.StoppedNote(130) {
		t.Errorf("final %q", fin.Text)
	}
	if j := Get(t, j); j.Spec.StopBy != "bob" {
		t.Errorf("stopBy %q, want bob", j.Spec.StopBy)
	}
	audited(t, "patch", j.Name, "bob", true)
	// The bot read alice's output as her, through myshelljobs, and never
	// as itself.
	poll(t, JobTimeout, "the read of alice's output as her", func() (bool, string) {
		var seen []string
		for _, e := range auditedReads(t, j, streamv1alpha1.OwnResource, streamv1alpha1.SubresourceLog) {
			if e.reader() == "alice" && e.ResponseStatus != nil && e.ResponseStatus.Code == 200 {
				return true, ""
			}
			seen = append(seen, e.reader())
		}
		return false, fmt.Sprint(seen)
	})
	if reads := auditedReads(t, j, streamv1alpha1.Resource, streamv1alpha1.SubresourceLog); len(reads) > 0 {
		t.Errorf("alice's job was read through shelljobs by %s", reads[0].reader())
	}
	for _, ev := range dev.EventsAfter(seq) {
		if strings.Contains(ev.Text, "squatted") {
			t.Errorf("carol's output reached the chat: %q", ev.Text)
		}
	}

	prod := cp.Prod["alice"]
	no := prod.Send(".a echo no")
	if got := prod.Answer(no); got != "You may not run commands on pool "+prodPool+"." {
		t.Errorf("alice on %s: %q", prodPool, got)
	}
}

// TestChatAccessApproval: bob's command in the prod group waits for
// approval, which the bot asks for there with buttons; alice may not
// decide, nor bob on his own job; dave approves it and it runs, and
// kubectl get sj names him. A job dave denies and one no one decides on
// in time (bob's private chat runs on e2e-hasty) never run, and their
// finals say why.
func TestChatAccessApproval(t *testing.T) {
	cp := chatAccess(t)
	bob := cp.Prod["bob"]
	m := bob.Send(".a echo approved")
	ask, approve, _ := bob.approvalMessage(m)
	j := JobOf(t, bob, m)
	n := j.Status.Number
	if want := texts.ApprovalAsked(n, prodPool, "bob", "echo approved"); ask.Text != want {
		t.Errorf("approval message %q, want %q", ask.Text, want)
	}
	for _, tc := range []struct{ who, want string }{
		{"alice", "You may not approve or deny jobs on pool " + prodPool + "."},
		{"bob", fmt.Sprintf("#%d is your own job: someone else must approve or deny it", n)},
		{"dave", fmt.Sprintf("✅ Approved #%d.", n)},
	} {
		if got := cp.Prod[tc.who].press(ask.ID, approve); got != tc.want {
			t.Errorf("%s's press: %q, want %q", tc.who, got, tc.want)
		}
	}
	if fin := bob.finalPast(m, ask, FinalTimeout); fin.Text != "approved" {
		t.Errorf("final %q", fin.Text)
	}
	audited(t, "patch", j.Name, "dave", true)
	if out := run(t, "-n", Namespace, "get", "sj", j.Name, "--no-headers"); !strings.Contains(out, "dave") {
		t.Errorf("kubectl get sj does not name the approver: %q", out)
	}

	m = bob.Send(".a echo never")
	ask, _, deny := bob.approvalMessage(m)
	n = JobOf(t, bob, m).Status.Number
	if got := cp.Prod["dave"].press(ask.ID, deny); got != fmt.Sprintf("⛔ Denied #%d.", n) {
		t.Errorf("dave's deny: %q", got)
	}
	if fin := bob.finalPast(m, ask, FinalTimeout); fin.Text != texts.DeniedNote("dave") {
		t.Errorf("denied final %q, want %q", fin.Text, texts.DeniedNote("dave"))
	}
	if j := JobOf(t, bob, m); j.Status.Ran {
		t.Error("the denied job ran")
	}

	private := cp.BobPrivate
	m = private.Send(".a echo late")
	ask, _, _ = private.approvalMessage(m)
	if fin := private.finalPast(m, ask, FinalTimeout); fin.Text != texts.ExpiredNote(5*time.Second) {
		t.Errorf("expired final %q, want %q", fin.Text, texts.ExpiredNote(5*time.Second))
	}
	if j := JobOf(t, private, m); j.Status.Ran || j.Spec.Pool != hastyPool {
		t.Errorf("the expired job: pool %q, ran %v", j.Spec.Pool, j.Status.Ran)
	}
}

// TestChatAccessFairShare: on e2e-dev (4 workers, maxRunningPerUser 2),
// alice's five commands run two at a time, and a waiting one's preview
// says so, while bob's runs beside them.
func TestChatAccessFairShare(t *testing.T) {
	cp := chatAccess(t)
	alice, bob := cp.Dev["alice"], cp.Dev["bob"]
	var cmds []control.Message
	for i := range 5 {
		cmds = append(cmds, alice.Send(fmt.Sprintf(".a echo a%d; sleep 20", i)))
	}
	alice.WaitMessage(FinalTimeout, "a preview that waits for alice's own jobs", func(m control.Message) bool {
		return IsPreview(m) && strings.Contains(m.Text, texts.WaitingOwn(2))
	})
	b := bob.Send(".a echo beside")
	if fin := bob.Final(b, FinalTimeout); fin.Text != "beside" {
		t.Errorf("bob's final %q", fin.Text)
	}
	running := 0
	for _, m := range cmds {
		if j := JobOf(t, alice, m); j.Status.Phase == shellv1alpha1.PhaseRunning {
			running++
		}
	}
	if running > 2 {
		t.Errorf("%d of alice's jobs run at once beside bob's, want 2 at most", running)
	}
	for i, m := range cmds {
		if fin := alice.Final(m, FinalTimeout+time.Minute); fin.Text != fmt.Sprintf("a%d", i) {
			t.Errorf("alice's #%d final %q", i, fin.Text)
		}
	}
}
