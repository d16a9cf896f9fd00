package shelljob

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

func TestSettles(t *testing.T) {
	end := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	now := end.Add(time.Second)
	const day, grace = 24 * time.Hour, 10 * time.Minute
	chat := shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginTelegram, User: "1"}
	const mark = "2026-01-01T10:00:30Z"
	cases := map[string]struct {
		job    *utiltesting.ShellJobWrapper
		pod    string
		mark   string
		ttl    time.Duration
		gone   bool
		want   time.Time
		settle bool
	}{
		"never ran, from the cli":           {job: utiltesting.MakeShellJob("j", "ns"), ttl: day, want: end.Add(day), settle: true},
		"ran, delivered":                    {job: utiltesting.MakeShellJob("j", "ns"), pod: "w", mark: mark, ttl: day, want: end.Add(30*time.Second + day), settle: true},
		"ran, not delivered":                {job: utiltesting.MakeShellJob("j", "ns"), pod: "w", ttl: day},
		"never ran, from the chat":          {job: utiltesting.MakeShellJob("j", "ns").Origin(chat), ttl: day},
		"never ran, from the chat, marked":  {job: utiltesting.MakeShellJob("j", "ns").Origin(chat), mark: mark, ttl: day, want: end.Add(30*time.Second + day), settle: true},
		"expires within the margin":         {job: utiltesting.MakeShellJob("j", "ns"), ttl: SettleMargin - time.Minute},
		"kept for ever":                     {job: utiltesting.MakeShellJob("j", "ns"), ttl: -1, settle: true},
		"being deleted":                     {job: utiltesting.MakeShellJob("j", "ns"), ttl: day, gone: true},
		"kept for ever, ran, not delivered": {job: utiltesting.MakeShellJob("j", "ns"), pod: "w", ttl: -1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			j := tc.job.Obj()
			j.Status.Phase, j.Status.Pod, j.Status.Number = shellv1alpha1.PhaseSucceeded, tc.pod, 7
			j.Status.CompletionTime = &metav1.Time{Time: end}
			if tc.mark != "" {
				j.Annotations = map[string]string{shellv1alpha1.AnnotationDelivered: tc.mark}
			}
			if tc.gone {
				j.DeletionTimestamp = &metav1.Time{Time: now}
			}
			got, ok := Settles(j, now, tc.ttl, grace)
			if ok != tc.settle || !got.Equal(tc.want) {
				t.Fatalf("Settles = %v, %v; want %v, %v", got, ok, tc.want, tc.settle)
			}
			if !ok {
				return
			}
			Settle(j, got)
			at, dated := SettledExpiry(j)
			if dated != !tc.want.IsZero() || !at.Equal(tc.want) {
				t.Errorf("SettledExpiry = %v, %v; want %v", at, dated, tc.want)
			}
			if n := SettledNumber(j); n != 7 {
				t.Errorf("SettledNumber = %d, want 7", n)
			}
		})
	}
	running := utiltesting.MakeShellJob("j", "ns").Obj()
	running.Status.Phase = shellv1alpha1.PhaseRunning
	if _, ok := Settles(running, now, day, grace); ok {
		t.Error("a running job settles")
	}
}

func TestSettleLabels(t *testing.T) {
	j := utiltesting.MakeShellJob("j", "ns").Labels(map[string]string{"app": "x"}).Obj()
	j.Status.Number = 12
	Settle(j, time.Unix(1767261600, 0))
	want := map[string]string{"app": "x", shellv1alpha1.LabelExpires: "1767261600", shellv1alpha1.LabelNumber: "12"}
	if diff := cmp.Diff(want, j.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	Settle(j, time.Time{})
	if v := j.Labels[shellv1alpha1.LabelExpires]; v != Never {
		t.Errorf("kept for ever: %s = %q, want %q", shellv1alpha1.LabelExpires, v, Never)
	}
	for _, v := range []string{Never, "soon", ""} {
		j.Labels[shellv1alpha1.LabelExpires] = v
		if at, ok := SettledExpiry(j); ok {
			t.Errorf("SettledExpiry of %q = %v, true", v, at)
		}
	}
	delete(j.Labels, shellv1alpha1.LabelNumber)
	if n := SettledNumber(j); n != 0 {
		t.Errorf("SettledNumber with no label = %d", n)
	}
}
