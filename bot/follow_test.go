package bot_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"shelljob.dev/shelljob/internal/agentapi"
)

// gappyAgent is an agent, as the stream API's server reaches it, that
// serves a job's output as one whose spool did not keep the bytes
// [gapFrom, gapTo), and whose first stream breaks cutAfter bytes past the
// gap.
type gappyAgent struct {
	agentapi.Client
	gapFrom, gapTo, cutAfter int64

	mu      sync.Mutex
	offsets []int64 // the offsets the follows asked for
}

var errCut = errors.New("stream cut")

func (g *gappyAgent) Follow(ctx context.Context, pod types.NamespacedName, job string, offset int64, w io.Writer) (int64, error) {
	g.mu.Lock()
	g.offsets = append(g.offsets, offset)
	first := len(g.offsets) == 1
	g.mu.Unlock()
	// The whole output, as the command wrote it, once it has started.
	var all bytes.Buffer
	if _, err := g.Client.Follow(ctx, pod, job, min(offset, 0), &all); err != nil {
		return offset, err
	}
	offset = max(offset, 0)
	data := all.Bytes()
	end := int64(len(data))
	if first {
		end = g.gapTo + g.cutAfter
	}
	sink := agentapi.SinkOf(w)
	if offset < g.gapFrom {
		if err := sink.Data(data[offset:g.gapFrom]); err != nil {
			return offset, err
		}
		offset = g.gapFrom
	}
	if offset < g.gapTo {
		if err := sink.Gap(g.gapTo - offset); err != nil {
			return offset, err
		}
		offset = g.gapTo
	}
	if err := sink.Data(data[offset:end]); err != nil {
		return offset, err
	}
	if first {
		return end, errCut
	}
	return end, nil
}

// seqText is what seq 1 n writes.
func seqText(from, to int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		b.WriteString(strconv.Itoa(i))
		b.WriteByte('\n')
	}
	return b.String()
}

// A stream that breaks after a gap in the spool resumes from the offset
// the agent reached: the output has the gap line once and no line twice.
func TestFollowResumesAfterGap(t *testing.T) {
	head := int64(len(seqText(1, 99)))
	gapTo := int64(len(seqText(1, 199)))
	g := &gappyAgent{gapFrom: head, gapTo: gapTo, cutAfter: int64(len(seqText(200, 210)))}
	e := newEnv(t, envOptions{streamAgent: func(a agentapi.Client) agentapi.Client { g.Client = a; return g }})
	since := e.srv.Seq()
	m := e.send(e.admin, e.group, ".a seq 1 300")
	fin := e.final(since, e.group, m.ID)
	want := strings.TrimSuffix(seqText(1, 99)+agentapi.GapLine(gapTo-head)+seqText(200, 300), "\n")
	if !strings.Contains(fin.Text, want) {
		t.Errorf("final = %q\nwant it to hold %q", fin.Text, want)
	}
	if c := strings.Count(fin.Text, "\n205\n"); c != 1 {
		t.Errorf("line 205 shows %d times", c)
	}
	// The final waits for the end of the follow: its follower is gone.
	if n := e.bot.Followers().Len(); n != 0 {
		t.Errorf("%d followers run after the final, want 0", n)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	// The first follow is opened at the create, to wait for the start.
	if len(g.offsets) != 2 || max(g.offsets[0], 0) != 0 || g.offsets[1] != gapTo+g.cutAfter {
		t.Errorf("follow offsets = %v, want [0 %d] (or AwaitStart first)", g.offsets, gapTo+g.cutAfter)
	}
}

// A stream that keeps breaking without reading anything (here, the stream
// API cannot be reached) is opened again after a wait that doubles, 1 s,
// 2 s, 4 s…: a server that cannot be reached is not asked once a second.
// The bot runs on a fake clock that only the test moves.
func TestFollowRetryBacksOff(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))
	e := newEnv(t, envOptions{clock: fc})
	front := e.cluster.Stream
	front.Refuse(true)
	before := front.Connections()
	follows := func() int64 { return front.Connections() - before }
	e.send(e.admin, e.group, ".a sleep 60")
	calls := func(want int64) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for follows() < want {
			if time.Now().After(deadline) {
				t.Fatalf("%d follows, want %d", follows(), want)
			}
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond)
		if n := follows(); n != want {
			t.Fatalf("%d follows, want %d", n, want)
		}
	}
	calls(1)
	for i, wait := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second} {
		fc.Step(wait - time.Millisecond)
		calls(int64(i + 1))
		fc.Step(time.Millisecond)
		calls(int64(i + 2))
	}
	// Between the retries, the job's one follower still runs.
	if n := e.bot.Followers().Len(); n != 1 {
		t.Errorf("%d followers run, want 1", n)
	}
}
