package texts_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/shelljob"
	utiltesting "shelljob.dev/shelljob/internal/testing"
	"shelljob.dev/shelljob/internal/texts"
)

// TestWaitingOwn: a preview tells, from the Scheduled condition the
// scheduler wrote, how many of its author's jobs a job waits for.
func TestWaitingOwn(t *testing.T) {
	waiting := func(reason, msg string) *shellv1alpha1.ShellJob {
		j := utiltesting.MakeShellJob("j", "ns").Obj()
		shelljob.SetScheduledCondition(j, time.Now(), metav1.ConditionFalse, reason, msg)
		return j
	}
	for name, tc := range map[string]struct {
		j      *shellv1alpha1.ShellJob
		n      int
		ok     bool
		header string
	}{
		"four of alice's": {j: waiting(shellv1alpha1.ShellJobScheduledReasonMaxRunningPerUser, texts.MaxRunningPerUser("alice", 4, 4, "dev")),
			n: 4, ok: true, header: "⏳ #3 waiting: 4 of your commands are running"},
		"one of a user named with spaces": {j: waiting(shellv1alpha1.ShellJobScheduledReasonMaxRunningPerUser, texts.MaxRunningPerUser("Alice Doe", 1, 1, "dev")),
			n: 1, ok: true, header: "⏳ #3 waiting: 1 of your commands is running"},
		"more than the cap, after it was lowered": {j: waiting(shellv1alpha1.ShellJobScheduledReasonMaxRunningPerUser, texts.MaxRunningPerUser("bob", 12, 2, "dev")),
			n: 12, ok: true, header: "⏳ #3 waiting: 12 of your commands are running"},
		"a free worker":    {j: waiting(shellv1alpha1.ShellJobScheduledReasonNoIdleWorker, "waiting for a free worker")},
		"not looked at":    {j: utiltesting.MakeShellJob("j", "ns").Obj()},
		"a garbled reason": {j: waiting(shellv1alpha1.ShellJobScheduledReasonMaxRunningPerUser, "some jobs")},
	} {
		t.Run(name, func(t *testing.T) {
			n, ok := texts.RunningOfUser(tc.j)
			if n != tc.n || ok != tc.ok {
				t.Fatalf("RunningOfUser = %d, %v; want %d, %v", n, ok, tc.n, tc.ok)
			}
			if ok {
				if got := texts.HeaderWaitingOwn(3, n); got != tc.header {
					t.Errorf("header %q, want %q", got, tc.header)
				}
			}
		})
	}
	if got, want := texts.MaxRunningPerUser("alice", 2, 2, "dev"),
		"2 jobs of alice are running on pool dev, as many as its maxRunningPerUser (2) allows; waiting for one to end"; got != want {
		t.Errorf("MaxRunningPerUser = %q, want %q", got, want)
	}
}

func TestApprovalNotes(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{texts.DeniedNote("bob"), "⛔ Denied by bob."},
		{texts.ExpiredNote(10 * time.Minute), "⌛ Not approved within 10 min: it never ran."},
		{texts.ExpiredNote(90 * time.Second), "⌛ Not approved within 90 s: it never ran."},
		{texts.ExpiredNote(30 * time.Second), "⌛ Not approved within 30 s: it never ran."},
		{texts.ExpiredNote(2 * time.Hour), "⌛ Not approved within 2 h: it never ran."},
		{texts.ExpiredNote(90 * time.Minute), "⌛ Not approved within 1 h 30 min: it never ran."},
		{texts.Approved("carol"), "approved by carol"},
		{texts.HeaderAwaitingApproval(3), "⏳ #3 waiting for approval"},
		{texts.StoppedByNote("bob", 130), "⏹ Stopped by bob (exit 130)."},
		{texts.StoppedByNote("", 130), "⏹ Stopped (exit 130)."},
		{texts.AwaitingApproval("prod", time.Date(2026, 12, 2, 17, 0, 0, 0, time.UTC)),
			"waiting until 2026-12-02T17:00:00Z for someone allowed to approve on pool prod, other than its author, to approve or deny it"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

// TestEndNoteNotApproved: a final tells why the job never ran, from its
// Finished condition.
func TestEndNoteNotApproved(t *testing.T) {
	for _, tc := range []struct {
		reason, msg, want string
	}{
		{shellv1alpha1.ShellJobFinishedReasonDenied, texts.Denied("bob"), "⛔ Denied by bob."},
		{shellv1alpha1.ShellJobFinishedReasonApprovalExpired, texts.NotApprovedWithin(10 * time.Minute), "⌛ Not approved within 10 min: it never ran."},
	} {
		j := utiltesting.MakeShellJob("j", "ns").Obj()
		shelljob.SetFinishedCondition(j, time.Now(), tc.reason, tc.msg)
		if got := texts.EndNote(shelljob.EndOf(j)); got != tc.want {
			t.Errorf("EndNote(%s) = %q, want %q", tc.reason, got, tc.want)
		}
	}
}
