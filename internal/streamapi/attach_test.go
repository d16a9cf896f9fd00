package streamapi_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/utils/ptr"

	"shelljob.dev/shelljob/agent/agenttest"
	streamv1alpha1 "shelljob.dev/shelljob/api/stream/v1alpha1"
	shellv1alpha1 "shelljob.dev/shelljob/api/v1alpha1"
	"shelljob.dev/shelljob/internal/agentapi"
	"shelljob.dev/shelljob/internal/shelljob"
	"shelljob.dev/shelljob/internal/streamapi/streamapitest"
	utiltesting "shelljob.dev/shelljob/internal/testing"
)

// executor is an attach to job as user with opts, over WebSocket or SPDY.
func (f *fixture) executor(user caller, job string, websocket bool, opts streamv1alpha1.ShellJobAttachOptions) remotecommand.Executor {
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
	return ex
}

// attach attaches to job as user, over WebSocket or SPDY, with stdin,
// stdout and stderr, and returns what came on stderr.
func (f *fixture) attach(user caller, job string, websocket bool, opts streamv1alpha1.ShellJobAttachOptions) (string, error) {
	f.t.Helper()
	ex := f.executor(user, job, websocket, opts)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var out, errOut bytes.Buffer
	stream := remotecommand.StreamOptions{Stdin: strings.NewReader("exit\n"), Stdout: &out, Stderr: &errOut, Tty: opts.TTY}
	if !opts.Stdin {
		stream.Stdin = nil
	}
	if opts.TTY {
		stream.Stderr = nil
	}
	err := ex.StreamWithContext(ctx, stream)
	return errOut.String(), err
}

// TestAttach checks that an attach reaches the agent's attach of the job
// on its worker, through the API server's pods/exec with the operator's
// credentials, over WebSocket and SPDY, for the job's owner and for
// create on shelljobs/attach alone; and that the agent's stderr and exit
// status come back. The job is no console: the agent refuses its attach,
// and that refusal comes back as it is; the server asks no hangup of a
// job that is no console.
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
	wantCommand := []string{agentapi.AgentPath, "attach", fmt.Sprintf("--protocol=%d", agentapi.ProtocolVersion), "--job=" + string(sj.UID), "--session="}
	sessions := map[string]bool{}

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
				// Each attach has a session of its own.
				command := slices.Clone(x.Command)
				if n := len(command) - 1; n >= 0 {
					session, _ := strings.CutPrefix(command[n], agentapi.FlagSession+"=")
					if session == "" || sessions[session] {
						t.Errorf("attach's session %q, want a new one", session)
					}
					sessions[session] = true
					command[n] = agentapi.FlagSession + "="
				}
				if diff := cmp.Diff(wantCommand, command); diff != "" || x.Container != agentapi.WorkerContainer {
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

	if h := f.hangups(sj); len(h) > 0 {
		t.Errorf("hangups of a job that is no console: %v", h)
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

// TestAttachCutHangsUp: under a kubelet that keeps a TTY exec open after
// its stream went, as containerd does, so that the agent's attach never
// learns that its caller went, the end of an attach hangs its console up:
// the console ends of the hangup the server asks for, with no stop step,
// and its attach's process is killed. So it is when the network cuts the
// attach, when its caller ends its input and closes it (as the CLI does
// after a piped stdin's grace), and when the replica that carried it
// stops. The hangup after an attach that the agent refused (a second one)
// leaves the first alone, and so does the one after a console that ended
// by itself. Over WebSocket and SPDY.
func TestAttachCutHangsUp(t *testing.T) {
	f := setup(t)
	kubelet := streamapitest.StartKubelet(t, env, f.cluster)
	tty := streamv1alpha1.ShellJobAttachOptions{Stdin: true, Stdout: true, TTY: true}
	type session struct {
		typing *io.PipeWriter
		// close closes the attach's stream, as its caller does.
		close func()
	}
	ends := []struct {
		name string
		end  func(f *fixture, s session)
		// hungUp: the console ends of a hangup; exit otherwise.
		hungUp bool
	}{
		{"cut", func(f *fixture, _ session) { f.replica.Cut() }, true},
		{"closed", func(_ *fixture, s session) {
			s.typing.Close()
			s.close()
		}, true},
		{"replica stopped", func(f *fixture, _ session) { f.replica.Restart() }, true},
		{"console exited", func(f *fixture, s session) {
			if _, err := io.WriteString(s.typing, "exit 3\r"); err != nil {
				f.t.Fatal(err)
			}
		}, false},
	}
	for _, transport := range []string{"WebSocket", "SPDY"} {
		for _, tc := range ends {
			t.Run(transport+" "+tc.name, func(t *testing.T) {
				f := f.in(t)
				websocket := transport == "WebSocket"
				name := strings.ToLower(strings.ReplaceAll(transport+"-"+tc.name, " ", "-"))
				f.create(utiltesting.MakeShellJob(name, f.cluster.Namespace).Command(agenttest.ConsoleShell).Mode(shellv1alpha1.ModeConsole).
					Origin(shellv1alpha1.ShellJobOrigin{Source: shellv1alpha1.OriginCLI, User: alice}).Obj())
				sj := f.waitJob(name, "started", shelljob.IsStarted)
				kubelet.Bind(types.NamespacedName{Namespace: sj.Status.PodNamespace, Name: sj.Status.Pod})

				ctx, closeStream := context.WithCancel(context.Background())
				defer closeStream()
				in, typing := io.Pipe()
				defer typing.Close()
				var screen utiltesting.SyncBuffer
				attached := make(chan error, 1)
				go func() {
					attached <- f.executor(own(alice), name, websocket, tty).StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: in, Stdout: &screen, Tty: true})
				}()
				waitScreen := func(want string) {
					t.Helper()
					f.waitFor("the screen shows "+want, func() (bool, string) {
						select {
						case err := <-attached:
							t.Fatalf("the attach ended: %v; screen %q", err, screen.String())
						default:
						}
						return strings.Contains(screen.String(), want), screen.String()
					})
				}
				waitScreen("READY> ")

				_, err := f.attach(own(alice), name, websocket, tty)
				var exit utilexec.ExitError
				if !errors.As(err, &exit) || exit.ExitStatus() != agentapi.ExitAttached {
					t.Fatalf("a second attach: %v; want it refused", err)
				}
				f.waitFor("the hangup after the refused attach", func() (bool, string) {
					h := f.hangups(sj)
					return len(h) == 1 && h[0].Err == nil, fmt.Sprint(h)
				})
				if _, err := io.WriteString(typing, "print still=$((6*7))\r"); err != nil {
					t.Fatal(err)
				}
				waitScreen("still=42")

				tc.end(f, session{typing: typing, close: closeStream})
				ended := f.finished(name)
				code := ptr.Deref(ended.Status.ExitCode, -1)
				wantAttach := []int{agentapi.ExitAttached, 3}
				if tc.hungUp {
					if code != 1 && code != 129 || len(ended.Status.StopSteps) > 0 {
						t.Errorf("the console ended with %d, stop steps %v; want the status of a hangup, and no stop", code, ended.Status.StopSteps)
					}
					wantAttach[1] = 128 + int(syscall.SIGKILL)
				} else {
					if code != 3 {
						t.Errorf("the console ended with %d, want its shell's 3", code)
					}
					if err := <-attached; !errors.As(err, &exit) || exit.ExitStatus() != 3 {
						t.Errorf("the attach ended with %v, want the console's exit status 3", err)
					}
				}
				f.waitFor("the attach's end", func() (bool, string) {
					var codes []int
					for _, x := range kubelet.Execs() {
						if slices.Contains(x.Command, agentapi.FlagJob+"="+string(sj.UID)) {
							codes = append(codes, x.ExitCode)
						}
					}
					// The refused attach's, then the first one's.
					return slices.Equal(codes, wantAttach), fmt.Sprint(codes)
				})
			})
		}
	}
}

// hangups are the hangups the replica asked of the agents for job sj.
func (f *fixture) hangups(sj *shellv1alpha1.ShellJob) []streamapitest.Hangup {
	var out []streamapitest.Hangup
	for _, h := range f.replica.Hangups() {
		if h.Job == string(sj.UID) {
			out = append(out, h)
		}
	}
	return out
}

// in is the fixture for subtest t.
func (f *fixture) in(t *testing.T) *fixture {
	return &fixture{t: t, cluster: f.cluster, replica: f.replica}
}

// waitFor waits until cond holds, and fails the test with what cond said
// last otherwise.
func (f *fixture) waitFor(what string, cond func() (bool, string)) {
	f.t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, testTimeout, true, func(context.Context) (bool, error) {
		ok, s := cond()
		last = s
		return ok, nil
	})
	if err != nil {
		f.t.Fatalf("%s: %v; last: %s", what, err, last)
	}
}
