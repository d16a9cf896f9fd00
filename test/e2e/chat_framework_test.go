//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/faketg/control"
	"shelljob.dev/shelljob/internal/texts"
)

// The chat suite drives the stack that hack/stack.sh installed through the
// fake Telegram in the cluster (Deployment shelljob-faketg), as a chat
// admin would, over its control API.

// Timeouts of the chat waits.
const (
	// ReplyTimeout covers a command's reply or first preview.
	ReplyTimeout = 30 * time.Second
	// FinalTimeout covers a short command's final.
	FinalTimeout = time.Minute
	// BotRestartTimeout covers a new bot pod connecting and catching up.
	BotRestartTimeout = 3 * time.Minute
	// chatPoll is how often a chat's messages are read while waiting.
	chatPoll = 250 * time.Millisecond
)

// FaketgService is the fake Telegram's Service, and its control port.
const (
	FaketgService     = "shelljob-faketg"
	faketgControlPort = 8080
	// BotDeployment and OperatorDeployment are the chart's Deployments.
	BotDeployment      = "shelljob-bot"
	OperatorDeployment = "shelljob-operator"
)

var (
	tgOnce sync.Once
	tg     control.API
	tgErr  error
)

// Telegram returns the fake's control API, reached through a kubectl
// port-forward that comes back when the fake's pod is replaced.
func Telegram(t *testing.T) control.API {
	t.Helper()
	tgOnce.Do(func() {
		url := os.Getenv("E2E_FAKETG_URL")
		if url == "" {
			url, tgErr = portForward("svc/"+FaketgService, faketgControlPort)
		}
		if tgErr == nil {
			tg = control.NewClient(url, nil)
		}
	})
	if tgErr != nil {
		t.Fatalf("the fake Telegram's control API: %v", tgErr)
	}
	botLogOnFailure(t)
	return tg
}

// botLogTests are the tests whose failure prints the bot's log, each with
// when it began.
var botLogTests sync.Map

// botLogOnFailure has a failed test print the bot's log of its time (a CI
// run keeps nothing else of it), once, at its end or at dumpBotLog.
func botLogOnFailure(t *testing.T) {
	if _, dup := botLogTests.LoadOrStore(t, time.Now()); !dup {
		t.Cleanup(func() { dumpBotLog(t) })
	}
}

// botLogLines is how many of the log's last lines (info and above) a
// failed test prints.
const botLogLines = 150

// dumpBotLog prints the bot's log since the test began when it failed,
// once: a cleanup that replaces the bot (a helm rollback) calls it first.
func dumpBotLog(t *testing.T) {
	began, ok := botLogTests.LoadAndDelete(t)
	if !ok || !t.Failed() {
		return
	}
	since := time.Since(began.(time.Time)).Round(time.Second) + 10*time.Second
	out, err := kubectlCmd("-n", Namespace, "logs", "-l", "app.kubernetes.io/component=bot", "--since="+since.String(),
		"--tail=-1", "--prefix", "--timestamps=false").CombinedOutput()
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if l != "" && !strings.Contains(l, `"level":"debug"`) {
			lines = append(lines, l)
		}
	}
	if len(lines) > botLogLines {
		lines = lines[len(lines)-botLogLines:]
	}
	t.Logf("the bot's log since the test began (err %v), its last %d lines but debug:\n%s", err, len(lines), strings.Join(lines, "\n"))
}

var forwardLine = regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+)`)

// portForward keeps `kubectl port-forward TARGET :PORT` (svc/NAME, pod/NAME) running on one
// local port for the whole run, and returns its URL.
func portForward(target string, port int) (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	local := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	ready := make(chan error, 1)
	go func() {
		// Pdeathsig is sent when the thread that started the process
		// exits: this one, kept to the goroutine, lives as long as the run.
		runtime.LockOSThread()
		first := true
		for {
			cmd := kubectlCmd("-n", Namespace, "port-forward", target, fmt.Sprintf("%d:%d", local, port))
			// The port-forward ends with the test binary: one left behind
			// would hold whatever the run inherited.
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			out, err := cmd.StdoutPipe()
			if err == nil {
				err = cmd.Start()
			}
			if err != nil {
				if first {
					ready <- err
					return
				}
				time.Sleep(time.Second)
				continue
			}
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if first && forwardLine.MatchString(sc.Text()) {
					first = false
					ready <- nil
				}
			}
			_ = cmd.Wait()
			time.Sleep(500 * time.Millisecond)
		}
	}()
	select {
	case err := <-ready:
		if err != nil {
			return "", err
		}
	case <-time.After(time.Minute):
		return "", fmt.Errorf("kubectl port-forward %s did not start", target)
	}
	return "http://127.0.0.1:" + strconv.Itoa(local), nil
}

// Chat is one chat of the fake, seen by one user.
type Chat struct {
	t    *testing.T
	api  control.API
	ID   int64
	User int64
}

// Users and chats of the fake that the suite uses.
type People struct {
	Admin   int64 // the bot's admin (hack/stack.sh)
	Mallory int64 // not an admin
	Private Chat  // the admin's private chat with the bot
	Group   Chat  // the group "ops", the admin in it
	// MalloryGroup is the same group, seen by Mallory.
	MalloryGroup Chat
}

// Chats waits until the bot is connected to the fake, and returns the
// suite's users and chats.
func Chats(t *testing.T) People {
	t.Helper()
	api := Telegram(t)
	ctx, cancel := context.WithTimeout(context.Background(), BotRestartTimeout)
	defer cancel()
	if err := api.WaitConnected(ctx); err != nil {
		t.Fatalf("the bot never connected to the fake: %v", err)
	}
	info, err := api.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var p People
	for _, u := range info.Users {
		switch {
		case u.Admin && p.Admin == 0:
			p.Admin = u.ID
			p.Private = Chat{t: t, api: api, ID: u.PrivateChat, User: u.ID}
		case !u.Admin && p.Mallory == 0:
			p.Mallory = u.ID
		}
	}
	for _, c := range info.Chats {
		if c.Kind == "group" && c.BotMember && p.Group.ID == 0 {
			p.Group = Chat{t: t, api: api, ID: c.ID, User: p.Admin}
			p.MalloryGroup = Chat{t: t, api: api, ID: c.ID, User: p.Mallory}
		}
	}
	if p.Admin == 0 || p.Mallory == 0 || p.Group.ID == 0 {
		t.Fatalf("the fake lacks an admin, a non-admin or a group with the bot: %+v", info)
	}
	return p
}

func (c Chat) ctx(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// Seq is the fake's last event so far.
func (c Chat) Seq() int {
	c.t.Helper()
	ctx, cancel := c.ctx(10 * time.Second)
	defer cancel()
	ev, err := c.api.Events(ctx, control.EventsQuery{After: 1 << 30})
	if err != nil {
		c.t.Fatal(err)
	}
	return ev.Last
}

// Send sends text as the chat's user.
func (c Chat) Send(text string) control.Message {
	c.t.Helper()
	return c.SendRequest(control.SendRequest{Text: text})
}

// Reply sends text as a reply to message id.
func (c Chat) Reply(id int, text string) control.Message {
	c.t.Helper()
	return c.SendRequest(control.SendRequest{Text: text, ReplyTo: id})
}

// SendRequest sends a message of the chat's user in the chat.
func (c Chat) SendRequest(r control.SendRequest) control.Message {
	c.t.Helper()
	r.User, r.Chat = c.User, c.ID
	ctx, cancel := c.ctx(30 * time.Second)
	defer cancel()
	m, err := c.api.Send(ctx, r)
	if err != nil {
		c.t.Fatalf("send %q: %v", r.Text, err)
	}
	return m
}

// Messages are the chat's messages now.
func (c Chat) Messages() []control.Message {
	c.t.Helper()
	ctx, cancel := c.ctx(30 * time.Second)
	defer cancel()
	ms, err := c.api.Messages(ctx, c.ID)
	if err != nil {
		c.t.Fatal(err)
	}
	return ms.Messages
}

// botReply tells whether m is the bot's reply to message id. Its ID
// must be later too: a fake Telegram that was reset numbers messages from
// 1 again, and a bot can still reply to an earlier run's message.
func botReply(m control.Message, id int) bool {
	return m.Out && m.ReplyTo == id && m.ID > id
}

// BotReplies are the bot's messages that reply to message id, in order.
func (c Chat) BotReplies(id int) []control.Message {
	c.t.Helper()
	var out []control.Message
	for _, m := range c.Messages() {
		if botReply(m, id) && !m.Deleted {
			out = append(out, m)
		}
	}
	return out
}

// WaitMessage waits until a message of the chat satisfies match, and
// returns it.
func (c Chat) WaitMessage(timeout time.Duration, what string, match func(control.Message) bool) control.Message {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	var last []control.Message
	for {
		last = c.Messages()
		for _, m := range last {
			if match(m) {
				return m
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out after %v waiting for %s; the chat's last messages:\n%s", timeout, what, describe(last, 8))
		}
		time.Sleep(chatPoll)
	}
}

// WaitEvent waits for a call of the bot after seq that matches.
func (c Chat) WaitEvent(after int, timeout time.Duration, what string, match func(control.Event) bool) control.Event {
	c.t.Helper()
	ctx, cancel := c.ctx(timeout)
	defer cancel()
	for {
		evs, err := c.api.Events(ctx, control.EventsQuery{After: after, Wait: 10 * time.Second, Chat: c.ID})
		if err != nil {
			c.t.Fatalf("waiting for %s: %v", what, err)
		}
		for _, e := range evs.Events {
			if match(e) {
				return e
			}
		}
		after = evs.Last
	}
}

// EventsAfter lists the bot's calls in the chat after seq, up to now.
func (c Chat) EventsAfter(after int) []control.Event {
	c.t.Helper()
	ctx, cancel := c.ctx(30 * time.Second)
	defer cancel()
	evs, err := c.api.Events(ctx, control.EventsQuery{After: after, Chat: c.ID})
	if err != nil {
		c.t.Fatal(err)
	}
	return evs.Events
}

// IsPreview says whether a bot message is a running job's preview (a
// header line, the Stop button) rather than a final or a reply.
func IsPreview(m control.Message) bool {
	return strings.HasPrefix(m.Text, "⏳ #") || strings.HasPrefix(m.Text, "⏹ #")
}

// IsFinalOf tells whether m is the final text of command message cmd.
func IsFinalOf(cmd, m control.Message) bool {
	return botReply(m, cmd.ID) && !m.Deleted && !IsPreview(m) && len(m.Buttons) == 0 &&
		m.Text != texts.FinishedBelow && m.Media == nil
}

// Final waits for the final of command message cmd: the bot's reply, or
// its preview edited into the final, whichever comes; in both, no header
// and no button.
func (c Chat) Final(cmd control.Message, timeout time.Duration) control.Message {
	c.t.Helper()
	return c.WaitMessage(timeout, fmt.Sprintf("the final of %q", cmd.Text), func(m control.Message) bool {
		return IsFinalOf(cmd, m)
	})
}

// FinalFile waits for the .txt final of command message cmd: a reply to
// cmd or to one of the bot's messages about it (its preview).
func (c Chat) FinalFile(cmd control.Message, timeout time.Duration) control.Message {
	c.t.Helper()
	about := map[int]bool{cmd.ID: true}
	return c.WaitMessage(timeout, fmt.Sprintf("the .txt of %q", cmd.Text), func(m control.Message) bool {
		if botReply(m, cmd.ID) {
			about[m.ID] = true
		}
		return m.Out && about[m.ReplyTo] && m.ID > cmd.ID && m.Media != nil && m.Media.Name == texts.OutputFileName
	})
}

// Preview waits for the preview of command message cmd.
func (c Chat) Preview(cmd control.Message, timeout time.Duration) control.Message {
	c.t.Helper()
	return c.WaitMessage(timeout, fmt.Sprintf("the preview of %q", cmd.Text), func(m control.Message) bool {
		return botReply(m, cmd.ID) && !m.Deleted && IsPreview(m)
	})
}

// Answer waits for the bot's one reply to message cmd (.k, .x, /settings).
func (c Chat) Answer(cmd control.Message) string {
	c.t.Helper()
	return c.WaitMessage(ReplyTimeout, fmt.Sprintf("the answer to %q", cmd.Text), func(m control.Message) bool {
		return botReply(m, cmd.ID) && !m.Deleted
	}).Text
}

var headerNumber = regexp.MustCompile(`^[⏳⏹] #(\d+)`)

// JobNumber is the #N of a preview.
func JobNumber(t *testing.T, preview control.Message) int64 {
	t.Helper()
	m := headerNumber.FindStringSubmatch(preview.Text)
	if m == nil {
		t.Fatalf("no job number in %q", preview.Text)
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}

// JobOf finds the ShellJob of a command message.
func JobOf(t *testing.T, chat Chat, cmd control.Message) *shellv1alpha1.ShellJob {
	t.Helper()
	var found *shellv1alpha1.ShellJob
	poll(t, ReplyTimeout, fmt.Sprintf("the job of %q", cmd.Text), func() (bool, string) {
		jobs, err := listJobsOf(chat, cmd)
		if err != nil {
			return false, err.Error()
		}
		for _, sj := range jobs {
			if found == nil || found.CreationTimestamp.Before(&sj.CreationTimestamp) {
				found = sj
			}
		}
		if found != nil {
			return true, ""
		}
		return false, fmt.Sprintf("no job from message %d of chat %d", cmd.ID, chat.ID)
	})
	return found
}

// jobsOf lists the ShellJobs made for a command message.
func jobsOf(t *testing.T, chat Chat, cmd control.Message) []string {
	t.Helper()
	jobs, err := listJobsOf(chat, cmd)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, sj := range jobs {
		names = append(names, sj.Name)
	}
	return names
}

func listJobsOf(chat Chat, cmd control.Message) ([]*shellv1alpha1.ShellJob, error) {
	var list shellv1alpha1.ShellJobList
	if err := c.List(context.Background(), &list, client.InNamespace(Namespace)); err != nil {
		return nil, err
	}
	// A fake Telegram that was reset numbers its messages from 1 again, so
	// jobs of an earlier run can share chat and message: only those
	// created since the message count.
	since := cmd.Date.Add(-2 * time.Second)
	var jobs []*shellv1alpha1.ShellJob
	for i := range list.Items {
		sj := &list.Items[i]
		o := sj.Spec.Origin
		if o.Source == shellv1alpha1.OriginTelegram && o.Chat == chat.ID && o.Message == int64(cmd.ID) && !sj.CreationTimestamp.Time.Before(since) {
			jobs = append(jobs, sj)
		}
	}
	return jobs, nil
}

func describe(ms []control.Message, n int) string {
	if len(ms) > n {
		ms = ms[len(ms)-n:]
	}
	var b strings.Builder
	for _, m := range ms {
		who := "user"
		if m.Out {
			who = "bot"
		}
		fmt.Fprintf(&b, "  #%d %s reply_to=%d buttons=%d deleted=%v: %q\n", m.ID, who, m.ReplyTo, len(m.Buttons), m.Deleted, m.Text)
	}
	return b.String()
}

// deletePod deletes pods by selector or name in a namespace, at once.
func deletePod(t *testing.T, ns string, args ...string) {
	t.Helper()
	run(t, append([]string{"-n", ns, "delete", "pod", "--grace-period=0", "--force", "--wait=false"}, args...)...)
}

// rolloutStatus waits for a Deployment of the release.
func rolloutStatus(t *testing.T, name string) {
	t.Helper()
	run(t, "-n", Namespace, "rollout", "status", "deployment/"+name, "--timeout=180s")
}

// helmRun runs helm (env HELM) on the e2e cluster.
func helmRun(t *testing.T, args ...string) string {
	t.Helper()
	helm := envOr("HELM", "helm")
	if ctx := os.Getenv("E2E_CONTEXT"); ctx != "" {
		args = append([]string{"--kube-context", ctx}, args...)
	}
	out, err := exec.Command(helm, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// chartDir is charts/shelljob of this tree.
func chartDir() string { return "../../charts/shelljob" }

// dockerExec runs a command in a kind node's container (named as the node).
func dockerExec(node string, args ...string) (string, error) {
	out, err := exec.Command("docker", append([]string{"exec", node}, args...)...).CombinedOutput()
	return string(out), err
}
