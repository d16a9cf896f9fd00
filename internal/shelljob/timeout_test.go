package shelljob

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	utiltesting "shelljob.dev/shelljob/internal/testing"
)

// TestTimeout: a running job's deadline and idle timeout, and how soon
// each is looked at again.
func TestTimeout(t *testing.T) {
	started := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		deadline, idle *int64
		activity       Activity
		statusStart    bool
		at             time.Duration
		wantWhy        string
		wantNext       time.Duration
	}{
		"no timeout": {activity: Activity{Reported: true, StartedAt: started}, at: time.Hour},
		"before the deadline": {deadline: ptr.To[int64](5), activity: Activity{Reported: true, StartedAt: started},
			at: 2 * time.Second, wantNext: 3 * time.Second},
		"at the deadline": {deadline: ptr.To[int64](5), activity: Activity{Reported: true, StartedAt: started},
			at: 5 * time.Second, wantWhy: "ran past its deadline of 5 s"},
		"the deadline counts from the status's start when the stream did not say": {deadline: ptr.To[int64](5),
			statusStart: true, at: 6 * time.Second, wantWhy: "ran past its deadline of 5 s"},
		"idle, not reported yet": {idle: ptr.To[int64](3), statusStart: true, at: time.Minute, wantNext: ActivityRecheck},
		"idle since the start": {idle: ptr.To[int64](3), activity: Activity{Reported: true, StartedAt: started},
			at: 3 * time.Second, wantWhy: "wrote no output for 3 s"},
		"wrote lately": {idle: ptr.To[int64](3), activity: Activity{Reported: true, StartedAt: started, LastOutput: started.Add(10 * time.Second)},
			at: 11 * time.Second, wantNext: 2 * time.Second},
		"idle since the last output": {idle: ptr.To[int64](3), activity: Activity{Reported: true, StartedAt: started, LastOutput: started.Add(10 * time.Second)},
			at: 13 * time.Second, wantWhy: "wrote no output for 3 s"},
		"the sooner of both": {deadline: ptr.To[int64](60), idle: ptr.To[int64](3), activity: Activity{Reported: true, StartedAt: started},
			at: time.Second, wantNext: 2 * time.Second},
		"the deadline first": {deadline: ptr.To[int64](2), idle: ptr.To[int64](30), activity: Activity{Reported: true, StartedAt: started},
			at: time.Second, wantNext: time.Second},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			j := utiltesting.MakeShellJob("j", "ns").Obj()
			j.Spec.ActiveDeadlineSeconds, j.Spec.IdleTimeoutSeconds = tc.deadline, tc.idle
			if tc.statusStart {
				j.Status.StartTime = ptr.To(metav1.NewTime(started))
			}
			why, next := Timeout(j, tc.activity, started.Add(tc.at))
			if why != tc.wantWhy || next != tc.wantNext {
				t.Errorf("Timeout = %q, %v; want %q, %v", why, next, tc.wantWhy, tc.wantNext)
			}
		})
	}
}
