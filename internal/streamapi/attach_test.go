package streamapi_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"

	streamv1alpha1 "shelljob.dev/shelljob/api/stream/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/shelljob"
	"shelljob.dev/shelljob/internal/streamapi/streamapitest"
)

// attach attaches to job as user, over WebSocket or SPDY, with stdin,
// stdout and stderr, and returns what came on stderr.
func (f *fixture) attach(user caller, job string, websocket bool, opts streamv1alpha1.ShellJobAttachOptions) (string, error) {
	f.t.Helper()
	cfg := f.replica.Config(env.User(f.t, user.user))
	u := f.request(f.as(user), "POST", job, streamv1alpha1.SubresourceAttach).VersionedParams(&opts, params).URL()
	var (
		ex  remotecommand.Executor
		err error
	)
	if websocket {
		ex, err = remotecommand.NewWebSocketExecutor(cfg, "GET", u.String())
	} else {
		ex, err = remotecommand.NewSPDYExecutor(cfg, "POST", u)
	}
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var out, errOut bytes.Buffer
	stream := remotecommand.StreamOptions{Stdin: strings.NewReader("exit\n"), Stdout: &out, Stderr: &errOut}
	if !opts.Stdin {
		stream.Stdin = nil
	}
	err = ex.StreamWithContext(ctx, stream)
	return errOut.String(), err
}

// TestAttach checks that an attach reaches the agent's attach of the job
// on its worker, through the API server's pods/exec with the operator's
// credentials, over WebSocket and SPDY, for the job's owner and for
// create on shelljobs/attach alone; and that the agent's stderr and exit
// status come back. The agent of this tree knows no attach: it exits with
// its usage error, which comes back as it is.
func TestAttach(t *testing.T) {
	f := setup(t)
	kubelet := streamapitest.StartKubelet(t, env, f.cluster)
	f.grant("attacher", []string{"carol"}, rbacv1.PolicyRule{
		APIGroups: []string{streamv1alpha1.GroupName}, Resources: []string{"shelljobs/attach"}, Verbs: []string{"create"},
	})
	f.grant("attach-getter", []string{"dave"}, rbacv1.PolicyRule{
		APIGroups: []string{streamv1alpha1.GroupName}, Resources: []string{"shelljobs/attach"}, Verbs: []string{"get"},
	})
	f.job("console", alice, "sleep 300")
	sj := f.waitJob("console", "started", shelljob.IsStarted)
	kubelet.Bind(types.NamespacedName{Namespace: sj.Status.PodNamespace, Name: sj.Status.Pod})
	all := streamv1alpha1.ShellJobAttachOptions{Stdin: true, Stdout: true, Stderr: true}
	wantCommand := []string{agentapi.AgentPath, "attach", fmt.Sprintf("--protocol=%d", agentapi.ProtocolVersion), "--job=" + string(sj.UID)}

	for _, transport := range []string{"WebSocket", "SPDY"} {
		websocket := transport == "WebSocket"
		for _, user := range []caller{own(alice), anyJob("carol")} {
			t.Run(transport+" as "+user.user+" through "+user.resource, func(t *testing.T) {
				before := len(kubelet.Execs())
				stderr, err := f.attach(user, "console", websocket, all)
				execs := kubelet.Execs()
				if len(execs) != before+1 {
					t.Fatalf("attach: %v; the kubelet served %d execs, want one", err, len(execs)-before)
				}
				x := execs[len(execs)-1]
				if diff := cmp.Diff(wantCommand, x.Command); diff != "" || x.Container != agentapi.WorkerContainer {
					t.Errorf("exec in container %s (-want +got):\n%s", x.Container, diff)
				}
				var exit utilexec.ExitError
				if !errors.As(err, &exit) || exit.ExitStatus() != x.ExitCode || x.ExitCode == 0 {
					t.Errorf("attach: %v; want the agent's exit status %d", err, x.ExitCode)
				}
				if stderr != x.Stderr || stderr == "" {
					t.Errorf("attach's stderr = %q, want the agent's %q", stderr, x.Stderr)
				}
			})
		}
		for _, user := range []caller{own(bob), anyJob(alice), anyJob(reader), anyJob("dave")} {
			t.Run(transport+" refused to "+user.user+" through "+user.resource, func(t *testing.T) {
				before := len(kubelet.Execs())
				_, err := f.attach(user, "console", websocket, all)
				if err == nil || !strings.Contains(err.Error(), "forbidden") || len(kubelet.Execs()) != before {
					t.Errorf("attach as %s: %v; want it forbidden", user, err)
				}
				t.Log(err)
			})
		}
	}

	bad := map[string]streamv1alpha1.ShellJobAttachOptions{
		"no stream":       {},
		"stderr with tty": {Stdin: true, Stdout: true, Stderr: true, TTY: true},
	}
	for name, opts := range bad {
		t.Run(name, func(t *testing.T) {
			if _, err := f.attach(own(alice), "console", false, opts); err == nil || !strings.Contains(err.Error(), "stderr") {
				t.Errorf("attach with %s: %v, want it refused", name, err)
			} else {
				t.Log(err)
			}
		})
	}

	f.patch("console", `{"spec":{"stop":true}}`)
	f.finished("console")
	if _, err := f.attach(own(alice), "console", false, all); err == nil || !strings.Contains(err.Error(), "has ended") {
		t.Errorf("attach to a job that ended: %v", err)
	}
	if _, err := f.attach(anyJob("carol"), "none", false, all); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("attach to a job that is not there: %v", err)
	}
}
