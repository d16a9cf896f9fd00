package agentclient

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"shelljob.dev/shelljob/agent/agenttest"
	"shelljob.dev/shelljob/internal/agentapi"
)

// streamIdle is the clients' idle limit here, ten of the agents'
// keepalives (--follow-keepalive).
const streamIdle = 2 * time.Second

// idleSetup serves a real daemon that sends a follow keepalive every
// 200 ms to a fake API server, and returns a client of it whose streams
// idle out after streamIdle.
func idleSetup(t *testing.T, opts Options) (*Client, *agenttest.Process) {
	t.Helper()
	dir, p := agenttest.ServeProcess(t, "--follow-keepalive=200ms")
	srv, _ := newFakeAPIServer(t, map[string]string{pod.String(): dir})
	opts.StreamIdle = streamIdle
	return newClient(t, srv.URL, opts), p
}

// gaveUp waits for the error of a call whose agent hangs: it must come,
// within a bound generous for a loaded machine, and say that the stream
// to the pod was cut idle.
func gaveUp(t *testing.T, what string, errs <-chan error) {
	t.Helper()
	hung := time.Now()
	select {
	case err := <-errs:
		if !errors.Is(err, agentapi.ErrStreamIdle) || !strings.Contains(err.Error(), pod.String()) {
			t.Errorf("%s on a hung agent: %v, want ErrStreamIdle naming the pod", what, err)
		}
		t.Logf("%s gave up %s after the agent hung: %v", what, time.Since(hung).Round(time.Millisecond), err)
	case <-time.After(waitLong):
		t.Fatalf("%s on a hung agent still waits after %s", what, waitLong)
	}
}

func waitFound(t *testing.T, s *seen) {
	t.Helper()
	select {
	case <-s.found:
	case <-time.After(waitLong):
		t.Fatalf("never got %q", s.want)
	}
}

// openChannel follows a first job to its end, which opens the pod's shared
// channel for the follows after it.
func openChannel(ctx context.Context, t *testing.T, c *Client) {
	t.Helper()
	if _, err := c.Start(ctx, pod, agentapi.StartRequest{Job: "first", Command: "true"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Follow(ctx, pod, "first", 0, io.Discard); err != nil {
		t.Fatal(err)
	}
	for !c.ChannelUp(pod) {
		time.Sleep(10 * time.Millisecond)
	}
}

// A follow whose agent stops answering mid-stream, SIGSTOPped, gives up
// once no byte came for the idle limit, with the offset it reached; once
// the agent answers again, the follow goes on from there. Over a shared
// channel, the hung channel is cut too.
func TestFollowOfAHungAgentGivesUp(t *testing.T) {
	for name, opts := range map[string]Options{"exec": {}, "channel": {ShareFollows: true}} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c, agent := idleSetup(t, opts)
			ctx, cancel := context.WithTimeout(context.Background(), 2*waitLong)
			defer cancel()
			if opts.ShareFollows {
				openChannel(ctx, t, c)
			}
			if _, err := c.Start(ctx, pod, agentapi.StartRequest{Job: "j", Command: "echo go; exec sleep 100"}); err != nil {
				t.Fatal(err)
			}
			saw := &seen{want: "go\n", found: make(chan struct{})}
			var reached int64
			errs := make(chan error, 1)
			go func() {
				var err error
				reached, err = c.Follow(ctx, pod, "j", 0, saw)
				errs <- err
			}()
			waitFound(t, saw)
			resume := agent.Pause(t)
			gaveUp(t, "follow", errs)
			if reached != 3 {
				t.Errorf("reached %d, want 3", reached)
			}
			if opts.ShareFollows && c.ChannelUp(pod) {
				// cut is asynchronous: the channel's exec ends after.
				time.Sleep(time.Second)
				if c.ChannelUp(pod) {
					t.Error("the hung channel is still up")
				}
			}
			resume()
			if _, err := c.Signal(ctx, pod, "j", agentapi.SIGKILL); err != nil {
				t.Fatal(err)
			}
			var rest bytes.Buffer
			if n, err := c.Follow(ctx, pod, "j", reached, &rest); err != nil || n != 3 || rest.Len() != 0 {
				t.Errorf("follow again from %d: %d, %q, %v", reached, n, rest.String(), err)
			}
		})
	}
}

// A command silent for longer than the idle limit, awaited and followed
// over an exec or a shared channel, is followed to its end: the agent's
// keepalives move.
func TestSilentCommandFollowedPastIdle(t *testing.T) {
	for name, opts := range map[string]Options{"exec": {}, "channel": {ShareFollows: true}} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c, _ := idleSetup(t, opts)
			ctx, cancel := context.WithTimeout(context.Background(), 2*waitLong)
			defer cancel()
			if opts.ShareFollows {
				openChannel(ctx, t, c)
			}
			began := time.Now()
			var out bytes.Buffer
			done := goFollow(func() (int64, error) { return c.Follow(ctx, pod, "quiet", agentapi.AwaitStart, &out) })
			time.Sleep(streamIdle + time.Second) // awaited past the limit
			if _, err := c.Start(ctx, pod, agentapi.StartRequest{Job: "quiet", Command: "sleep 3; echo done"}); err != nil {
				t.Fatal(err)
			}
			r := <-done
			if r.err != nil || r.n != 5 || out.String() != "done\n" {
				t.Errorf("follow: %d, %q, %v", r.n, out.String(), r.err)
			}
			t.Logf("followed for %s with a limit of %s", time.Since(began).Round(time.Millisecond), streamIdle)
			if opts.ShareFollows && !c.ChannelUp(pod) {
				t.Error("the channel went down")
			}
		})
	}
}

// GetFiles from an agent that stops answering mid-stream gives up; one
// whose own writer is slower than the limit does not.
func TestGetFilesOfAHungAgentGivesUp(t *testing.T) {
	t.Parallel()
	c, agent := idleSetup(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitLong)
	defer cancel()
	const size = 16 << 20 // more than the socket, pipe and stream buffers
	if _, err := c.Start(ctx, pod, agentapi.StartRequest{Job: "big", Command: `head -c 16777216 /dev/zero > "$SHELLJOB_OUT/big"`}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Follow(ctx, pod, "big", 0, io.Discard); err != nil {
		t.Fatal(err)
	}

	var resume func()
	errs := make(chan error, 1)
	go func() {
		errs <- c.GetFiles(ctx, pod, "big", 0, &onFirst{w: io.Discard, do: func() { resume = agent.Pause(t) }})
	}()
	gaveUp(t, "get-files", errs)
	resume()

	var tarball countWriter
	slow := &onFirst{w: &tarball, do: func() { time.Sleep(2 * streamIdle) }}
	if err := c.GetFiles(ctx, pod, "big", 0, slow); err != nil || tarball.n < size {
		t.Errorf("get-files with a slow writer: %d bytes, %v", tarball.n, err)
	}
}

// PutFiles to an agent that stops answering mid-stream gives up.
func TestPutFilesToAHungAgentGivesUp(t *testing.T) {
	t.Parallel()
	c, agent := idleSetup(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitLong)
	defer cancel()
	// More than every buffer between here and the daemon, TCP's included.
	var resume func()
	in := &onFirstRead{r: bigTar(t, 64<<20), do: func() { resume = agent.Pause(t) }}
	errs := make(chan error, 1)
	go func() { errs <- c.PutFiles(ctx, pod, "in", in) }()
	gaveUp(t, "put-files", errs)
	resume()
}

// onFirst runs do before its first write.
type onFirst struct {
	w    io.Writer
	do   func()
	once sync.Once
}

func (o *onFirst) Write(p []byte) (int, error) {
	o.once.Do(o.do)
	return o.w.Write(p)
}

// onFirstRead runs do before its first read.
type onFirstRead struct {
	r    io.Reader
	do   func()
	once sync.Once
}

func (o *onFirstRead) Read(p []byte) (int, error) {
	o.once.Do(o.do)
	return o.r.Read(p)
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// bigTar is a tar stream of one file of size zeros, size a multiple of
// 512, made as it is read.
func bigTar(t *testing.T, size int64) io.Reader {
	var hdr bytes.Buffer // the header goes out as it is written
	tw := tar.NewWriter(&hdr)
	if err := tw.WriteHeader(&tar.Header{Name: "big", Mode: 0o644, Size: size, Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	return io.MultiReader(&hdr, io.LimitReader(zeros{}, size), bytes.NewReader(make([]byte, 1024)))
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// The pod's event stream, quiet longer than its idle limit, stays up on
// the agent's keepalives, over a warm channel or, without, over the
// events exec; once the agent stops answering (SIGSTOP), the stream is cut
// and Events returns, to be opened again.
func TestEventsOfAHungAgent(t *testing.T) {
	for name, warm := range map[string]bool{"warm channel": true, "events exec": false} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir, agent := agenttest.ServeProcess(t, "--events-keepalive=200ms")
			srv, f := newFakeAPIServer(t, map[string]string{pod.String(): dir})
			f.flags = map[string][]string{agentapi.CmdControl: {"--keepalive=200ms"}}
			c := newClient(t, srv.URL, Options{Warm: warm})
			c.channelIdle = streamIdle
			ctx, cancel := context.WithTimeout(context.Background(), 2*waitLong)
			defer cancel()
			events := runEvents(ctx, c)
			events.waitSynced(t)
			select {
			case err := <-events.done:
				t.Fatalf("a quiet stream ended: %v", err)
			case <-time.After(2 * streamIdle):
			}
			if c.ChannelUp(pod) != warm {
				t.Fatalf("channel up %v, want %v", c.ChannelUp(pod), warm)
			}
			resume := agent.Pause(t)
			defer resume()
			gaveUp(t, "the event stream", events.done)
			if c.ChannelUp(pod) {
				t.Error("the hung channel is still up")
			}
		})
	}
}
