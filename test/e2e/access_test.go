//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	streamv1alpha1 "shelljob.dev/shelljob/api/stream/v1alpha1"
	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/identity"
	utiltesting "shelljob.dev/shelljob/internal/testing"
	"shelljob.dev/shelljob/internal/texts"
)

// The people, on kind, as far as the cluster and the CLI show them
// without the bot: the test's admin impersonates them. alice and bob are
// chat admins: their requests carry what the bot's impersonation of them
// will (the group shelljob:telegram and their Telegram id as the
// shelljob.dev/telegram-user extra). carol and dave use kubectl shelljob
// (--as). Every one is in the group e2e-people, which may create and
// change ShellJobs and follow their output, with no right on any pool:
//
//   - alice may use e2e-dev;
//   - bob may use e2e-dev and e2e-prod, and stop others' jobs on e2e-dev;
//   - carol may use e2e-dev;
//   - dave may approve on e2e-prod and e2e-hasty.
//
// The API server's audit log (hack/audit-policy.yaml, on the control plane
// node) names each of them for what they did.
const (
	devPool   = "e2e-dev"
	prodPool  = "e2e-prod"
	hastyPool = "e2e-hasty"
	people    = "e2e-people"
)

// telegramIDs are alice's and bob's Telegram ids, as the chart would map
// them.
var telegramIDs = map[string]int64{"alice": 111000111, "bob": 222000222}

// accessPools creates the access tests' pools, kept for the suite (the
// clean step of the next run removes them), and the Roles that give the
// people their rights, gone when the test ends.
func accessPools(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for _, p := range []*shellv1alpha1.ShellPool{
		utiltesting.MakeShellPool(devPool, Namespace).Replicas(4).MaxRunningPerUser(2).Obj(),
		utiltesting.MakeShellPool(prodPool, Namespace).Replicas(1).Approval(600).Obj(),
		utiltesting.MakeShellPool(hastyPool, Namespace).Replicas(1).Approval(5).Obj(),
	} {
		metav1.SetMetaDataLabel(&p.ObjectMeta, labelPool, "true")
		// Kept for the suite's other access tests, they ask for little of
		// the nodes' CPU, which later tests' pools need.
		p.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}
		if err := c.Create(ctx, p); client.IgnoreAlreadyExists(err) != nil {
			t.Fatalf("create pool %s: %v", p.Name, err)
		}
	}
	group := shellv1alpha1.GroupVersion.Group
	rules := map[string][]rbacv1.PolicyRule{
		"e2e-people": {
			{APIGroups: []string{group}, Resources: []string{"shelljobs"}, Verbs: []string{"create", "get", "list", "watch", "patch"}},
			{APIGroups: []string{group}, Resources: []string{"shellpools"}, Verbs: []string{"get", "list", "watch"}},
			// kubectl shelljob reads its jobs through the stream API, as
			// their owner.
			{APIGroups: []string{streamv1alpha1.GroupName}, Resources: []string{"myshelljobs/log", "myshelljobs/files"}, Verbs: []string{"get"}},
			{APIGroups: []string{streamv1alpha1.GroupName}, Resources: []string{"myshelljobs/files"}, Verbs: []string{"create", "update"}},
			{APIGroups: []string{streamv1alpha1.GroupName}, Resources: []string{"myshelljobs/attach"}, Verbs: []string{"create"}},
		},
	}
	subjects := map[string][]rbacv1.Subject{"e2e-people": {{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: people}}}
	for pool, grants := range map[string]map[string][]string{
		devPool:   {"use": {"alice", "bob", "carol"}, "stop": {"bob"}},
		prodPool:  {"use": {"bob"}, "approve": {"dave"}},
		hastyPool: {"use": {"bob"}, "approve": {"dave"}},
	} {
		for verb, users := range grants {
			name := pool + "-" + verb
			rules[name] = []rbacv1.PolicyRule{{APIGroups: []string{group}, Resources: []string{"shellpools"}, ResourceNames: []string{pool}, Verbs: []string{verb}}}
			for _, u := range users {
				subjects[name] = append(subjects[name], rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: u})
			}
		}
	}
	for name, r := range rules {
		createGone(t, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: name}, Rules: r})
		createGone(t, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: name},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}, Subjects: subjects[name]})
	}
	for _, p := range []string{devPool, prodPool, hastyPool} {
		WaitForPoolAvailable(t, p)
	}
}

// createGone creates obj, or replaces what an earlier run left, and
// deletes it when the test ends.
func createGone(t *testing.T, obj client.Object) {
	t.Helper()
	ctx := context.Background()
	_ = c.Delete(ctx, obj)
	poll(t, JobTimeout, "a fresh "+obj.GetName(), func() (bool, string) {
		err := c.Create(ctx, obj.DeepCopyObject().(client.Object))
		return err == nil, fmt.Sprint(err)
	})
	t.Cleanup(func() { _ = c.Delete(context.Background(), obj) })
}

// person is the test's admin impersonating a chat admin as the bot does,
// or, with no Telegram id, a person with their own credentials.
func person(t *testing.T, user string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(restConfig)
	if id, ok := telegramIDs[user]; ok {
		cfg.Impersonate = identity.Identity{TelegramUser: id, User: user, Groups: []string{people, identity.Group}}.Impersonation()
	} else {
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{people}}
	}
	cl, err := client.New(cfg, client.Options{Scheme: c.Scheme(), Mapper: c.RESTMapper()})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// chatJob is the job the bot makes of a chat admin's command.
func chatJob(t *testing.T, user, pool, command string) *shellv1alpha1.ShellJob {
	j := utiltesting.MakeShellJob("access-"+user+"-"+rand.String(5), Namespace).Pool(pool).Command(command).
		Labels(map[string]string{labelTest: testLabel(t)}).
		Origin(shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginTelegram, User: user, TelegramUser: telegramIDs[user],
			Chat: -1001234567890, Message: int64(rand.Int())}).Obj()
	return j
}

// createAs creates j as user, deleted when the test ends.
func createAs(t *testing.T, user string, j *shellv1alpha1.ShellJob) error {
	t.Helper()
	err := person(t, user).Create(context.Background(), j)
	if err == nil {
		t.Cleanup(func() { _ = c.Delete(context.Background(), j) })
	}
	return err
}

// shelljobAs runs `kubectl shelljob ARGS` as user, of the group people.
func shelljobAs(t *testing.T, user string, args ...string) cliResult {
	t.Helper()
	return shelljob(t, "", append([]string{"--as", user, "--as-group", people, "--cache-dir", t.TempDir()}, args...)...)
}

// audited waits until the audit log holds a completed request of verb on
// ShellJob name by who, admitted (a 2xx code) or not.
func audited(t *testing.T, verb, name, who string, admitted bool) {
	t.Helper()
	poll(t, JobTimeout, fmt.Sprintf("the audit log's %s of %s by %s", verb, name, who), func() (bool, string) {
		out, err := dockerExec(controlPlaneNode, "cat", auditLog)
		if err != nil {
			return false, fmt.Sprintf("read %s on %s: %v", auditLog, controlPlaneNode, err)
		}
		var seen []string
		sc := bufio.NewScanner(strings.NewReader(out))
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var e auditEvent
			if json.Unmarshal(sc.Bytes(), &e) != nil || e.ObjectRef == nil || e.ObjectRef.APIGroup != shellv1alpha1.GroupVersion.Group ||
				e.ObjectRef.Resource != "shelljobs" || e.ObjectRef.Subresource != "" || e.ObjectRef.Name != name || e.Stage != "ResponseComplete" || e.ResponseStatus == nil {
				continue
			}
			ok := e.ResponseStatus.Code/100 == 2
			if e.Verb == verb && e.reader() == who && ok == admitted {
				return true, ""
			}
			seen = append(seen, fmt.Sprintf("%s by %s (%d)", e.Verb, e.reader(), e.ResponseStatus.Code))
		}
		return false, fmt.Sprint(seen)
	})
}

// TestAccessCreateAndStop: alice's command runs on dev as alice, and the
// audit log names her; carol cannot stop it, and is told whose it is;
// bob can, and the Event and the audit log name him. alice's command on
// prod, and carol's exec there, are refused with the chat's words.
func TestAccessCreateAndStop(t *testing.T) {
	accessPools(t)
	ctx := context.Background()
	j := chatJob(t, "alice", devPool, "sleep 300")
	if err := createAs(t, "alice", j); err != nil {
		t.Fatalf("alice's job on %s: %v", devPool, err)
	}
	j = WaitForJobPhase(t, j, JobTimeout, shellv1alpha1.PhaseRunning)
	audited(t, "create", j.Name, "alice", true)

	// carol, who may patch ShellJobs, cannot take a running job out of
	// the operator's sight (and out of its author's fair share) by
	// labelling it settled.
	settle := client.MergeFrom(j.DeepCopy())
	hidden := j.DeepCopy()
	metav1.SetMetaDataLabel(&hidden.ObjectMeta, shellv1alpha1.LabelExpires, "4102444800")
	if err := person(t, "carol").Patch(ctx, hidden, settle); err == nil || !strings.Contains(err.Error(), "only the shelljob operator sets") {
		t.Errorf("carol labels a running job settled: %v, want refused", err)
	}

	r := shelljobAs(t, "carol", "stop", j.Name)
	// A numbered job is named by its number, as the chat and kubectl get sj show it.
	if want := fmt.Sprintf("#%d is alice's job; you may not stop others' jobs on pool %s", j.Status.Number, devPool); r.code != 1 || !strings.Contains(r.errOut, want) {
		t.Errorf("carol's stop: exit %d, stdout %q, stderr %q; want it refused with %q", r.code, r.out, r.errOut, want)
	}
	audited(t, "patch", j.Name, "carol", false)
	if Get(t, j).Spec.Stop {
		t.Fatal("carol stopped alice's job")
	}

	cur := Get(t, j)
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Spec.Stop, cur.Spec.StopReason = true, shellv1alpha1.StopReasonUser
	if err := person(t, "bob").Patch(ctx, cur, patch); err != nil {
		t.Fatalf("bob's stop of alice's job: %v", err)
	}
	j = WaitForJobPhase(t, j, JobTimeout, shellv1alpha1.PhaseStopped)
	if j.Spec.StopBy != "bob" {
		t.Errorf("stopBy %q, want bob", j.Spec.StopBy)
	}
	if c := meta.FindStatusCondition(j.Status.Conditions, shellv1alpha1.ShellJobFinished); c == nil || !strings.HasPrefix(c.Message, "stopped by bob") {
		t.Errorf("Finished %+v, want it stopped by bob", c)
	}
	audited(t, "patch", j.Name, "bob", true)
	poll(t, JobTimeout, "the Events that name alice and bob", func() (bool, string) {
		notes := eventNotes(t, j.Name)
		return slices.ContainsFunc(notes, func(n string) bool { return strings.Contains(n, "created by alice") }) &&
			slices.ContainsFunc(notes, func(n string) bool { return strings.Contains(n, "stopping by bob (User)") }), fmt.Sprint(notes)
	})

	if err := createAs(t, "alice", chatJob(t, "alice", prodPool, "true")); err == nil || !strings.Contains(err.Error(), "You may not run commands on pool "+prodPool+".") {
		t.Errorf("alice's job on %s: %v, want refused", prodPool, err)
	}
	if r := shelljobAs(t, "carol", "exec", "--pool", prodPool, "--", "true"); r.code != 1 ||
		!strings.Contains(r.errOut, "You may not run commands on pool "+prodPool+".") {
		t.Errorf("carol's exec on %s: exit %d, stdout %q, stderr %q; want the API's refusal", prodPool, r.code, r.out, r.errOut)
	}
	if r := shelljobAs(t, "carol", "exec", "--pool", devPool, "--", "echo", "hi from carol"); r.code != 0 || r.out != "hi from carol\n" {
		t.Errorf("carol's exec on %s: exit %d, stdout %q, stderr %q", devPool, r.code, r.out, r.errOut)
	}
	// carol, with her own credentials, cannot claim a chat admin's origin.
	forged := chatJob(t, "alice", devPool, "true")
	forged.Spec.Origin.User = "carol"
	if err := createAs(t, "carol", forged); err == nil || !strings.Contains(err.Error(), "only the shelljob bot creates jobs from Telegram") {
		t.Errorf("carol's Telegram job: %v, want refused", err)
	}
}

// eventNotes lists the notes of the Events about a job.
func eventNotes(t *testing.T, name string) []string {
	t.Helper()
	var list eventsv1.EventList
	if err := c.List(context.Background(), &list, client.InNamespace(Namespace)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Name == name {
			out = append(out, e.Reason+": "+e.Note)
		}
	}
	return out
}

// TestAccessApproval: bob's job on prod waits for approval; alice cannot
// approve it, nor bob his own, and each is told why; dave approves it, and
// it runs, which kubectl get sj shows; a denied job and one no one decided
// on in time never run.
func TestAccessApproval(t *testing.T) {
	accessPools(t)
	j := chatJob(t, "bob", prodPool, "echo approved")
	if err := createAs(t, "bob", j); err != nil {
		t.Fatalf("bob's job on %s: %v", prodPool, err)
	}
	j = WaitForJobPhase(t, j, JobTimeout, shellv1alpha1.PhaseAwaitingApproval)
	n := "#" + strconv.FormatInt(j.Status.Number, 10)
	if r := shelljobAs(t, "dave", "ls"); r.code != 0 || !regexp.MustCompile(`(?m)^`+n[1:]+`\s+`+j.Name+`\s+\S+\s+AwaitingApproval\s+bob\s`).MatchString(r.out) {
		t.Errorf("ls: exit %d\n%s%s", r.code, r.out, r.errOut)
	}
	for who, want := range map[string]string{
		"alice": "You may not approve or deny jobs on pool " + prodPool + ".",
		"bob":   n + " is your own job: someone else must approve or deny it",
	} {
		if r := shelljobAs(t, who, "approve", n); r.code != 1 || !strings.Contains(r.errOut, want) {
			t.Errorf("%s approves: exit %d, stdout %q, stderr %q; want %q", who, r.code, r.out, r.errOut, want)
		}
	}
	if r := shelljobAs(t, "dave", "approve", n); r.code != 0 || r.out != "✅ Approved "+n+".\n" {
		t.Errorf("dave approves: exit %d, stdout %q, stderr %q", r.code, r.out, r.errOut)
	}
	j = WaitForJobPhase(t, j, JobTimeout, shellv1alpha1.PhaseSucceeded)
	if out := Output(t, j); out != "approved\n" {
		t.Errorf("output %q", out)
	}
	if got := run(t, "-n", Namespace, "get", "sj", j.Name); !regexp.MustCompile(`(?m)^NAME\s.*\sAPPROVER\s`).MatchString(got) ||
		!regexp.MustCompile(`(?m)^`+j.Name+`\s.*\sbob\s+dave\s`).MatchString(got) {
		t.Errorf("kubectl get sj does not show dave as the approver:\n%s", got)
	}
	audited(t, "patch", j.Name, "dave", true)

	denied := chatJob(t, "bob", prodPool, "echo never")
	if err := createAs(t, "bob", denied); err != nil {
		t.Fatal(err)
	}
	denied = WaitForJobPhase(t, denied, JobTimeout, shellv1alpha1.PhaseAwaitingApproval)
	if r := shelljobAs(t, "dave", "deny", denied.Name); r.code != 0 || !strings.HasPrefix(r.out, "⛔ Denied #") {
		t.Errorf("dave denies: exit %d, stdout %q, stderr %q", r.code, r.out, r.errOut)
	}
	denied = WaitForJobPhase(t, denied, JobTimeout, shellv1alpha1.PhaseDenied)
	if denied.Status.Ran || denied.Status.Pod != "" || FinishedReason(denied) != shellv1alpha1.ShellJobFinishedReasonDenied {
		t.Errorf("the denied job: %+v", denied.Status)
	}

	expired := chatJob(t, "bob", hastyPool, "echo never")
	if err := createAs(t, "bob", expired); err != nil {
		t.Fatal(err)
	}
	expired = WaitForJobPhase(t, expired, JobTimeout, shellv1alpha1.PhaseExpired)
	if expired.Status.Ran || expired.Status.Pod != "" || FinishedReason(expired) != shellv1alpha1.ShellJobFinishedReasonApprovalExpired {
		t.Errorf("the expired job: %+v", expired.Status)
	}

	// From the terminal: bob's exec waits, and says why it never ran.
	done := make(chan cliResult, 1)
	go func() { done <- shelljobAs(t, "bob", "exec", "--pool", prodPool, "--", "echo", "never") }()
	var waiting *shellv1alpha1.ShellJob
	poll(t, JobTimeout, "bob's exec awaiting approval", func() (bool, string) {
		var list shellv1alpha1.ShellJobList
		if err := c.List(context.Background(), &list, client.InNamespace(Namespace)); err != nil {
			return false, err.Error()
		}
		for i := range list.Items {
			if j := &list.Items[i]; j.Spec.Origin.Source == shellv1alpha1.OriginCLI && j.Spec.Origin.User == "bob" &&
				j.Status.Phase == shellv1alpha1.PhaseAwaitingApproval {
				waiting = j
				return true, ""
			}
		}
		return false, ""
	})
	t.Cleanup(func() { _ = c.Delete(context.Background(), waiting) })
	if r := shelljobAs(t, "dave", "deny", waiting.Name); r.code != 0 {
		t.Errorf("dave denies: exit %d, %q", r.code, r.errOut)
	}
	if r := <-done; r.code != 126 || !strings.Contains(r.errOut, texts.HeaderAwaitingApproval(waiting.Status.Number)) ||
		!strings.Contains(r.errOut, "⛔ Denied by dave.") {
		t.Errorf("bob's exec: exit %d, stdout %q, stderr %q", r.code, r.out, r.errOut)
	}
}

// TestAccessFairShare: with maxRunningPerUser 2 on a 4-worker pool,
// alice's five jobs run two at a time while bob's run beside them.
func TestAccessFairShare(t *testing.T) {
	accessPools(t)
	var alices, bobs []*shellv1alpha1.ShellJob
	for i := range 5 {
		j := chatJob(t, "alice", devPool, "sleep 300")
		j.Name = fmt.Sprintf("access-fair-alice-%d-%s", i, rand.String(4))
		if err := createAs(t, "alice", j); err != nil {
			t.Fatal(err)
		}
		alices = append(alices, j)
	}
	for i := range 2 {
		j := chatJob(t, "bob", devPool, "sleep 300")
		j.Name = fmt.Sprintf("access-fair-bob-%d-%s", i, rand.String(4))
		if err := createAs(t, "bob", j); err != nil {
			t.Fatal(err)
		}
		bobs = append(bobs, j)
	}
	running := func(jobs []*shellv1alpha1.ShellJob) []string {
		var out []string
		for _, j := range jobs {
			if Get(t, j).Status.Phase == shellv1alpha1.PhaseRunning {
				out = append(out, j.Name)
			}
		}
		return out
	}
	poll(t, JobTimeout, "two of alice's and both of bob's running", func() (bool, string) {
		a, b := running(alices), running(bobs)
		return len(a) == 2 && len(b) == 2, fmt.Sprintf("alice's %v, bob's %v", a, b)
	})
	for _, j := range alices[2:] {
		got := Get(t, j)
		if n, ok := texts.RunningOfUser(got); got.Status.Phase != shellv1alpha1.PhaseQueued || !ok || n != 2 {
			t.Errorf("%s: phase %s, conditions %v; want it waiting for alice's two", j.Name, got.Status.Phase, got.Status.Conditions)
		}
	}
	// One of alice's ends: the next of hers runs, still two at a time.
	first := Get(t, alices[0])
	if first.Status.Phase != shellv1alpha1.PhaseRunning {
		t.Fatalf("alice's oldest job is %s, want Running", first.Status.Phase)
	}
	Stop(t, first)
	WaitForJobPhase(t, first, JobTimeout, shellv1alpha1.PhaseStopped)
	poll(t, JobTimeout, "alice's third job running", func() (bool, string) {
		a := running(alices)
		return slices.Equal(a, []string{alices[1].Name, alices[2].Name}), fmt.Sprint(a)
	})
	StopAll(t, append(alices[1:], bobs...))
}
