package agent_test

import (
	"context"
	"io"
	"strconv"
	"testing"

	"shelljob.dev/shelljob/internal/agentapi"
)

// BenchmarkAgentThroughput runs `head -c 256M /dev/zero` through a real
// agent, start to the end of a follow from 0, the way a caller streams a
// job: the figure is the command's output per second through the agent.
// The follower reads every byte it can and gets a gap line for what the
// spool dropped meanwhile; it never slows the command.
func BenchmarkAgentThroughput(b *testing.B) {
	const size = 256 << 20
	d := startDaemonB(b)
	b.SetBytes(size)
	b.ResetTimer()
	for i := range b.N {
		id := "bench-" + strconv.Itoa(i)
		ctx := context.Background()
		if _, err := d.c.Start(ctx, agentapi.StartRequest{Job: id, Command: "head -c 256M /dev/zero"}); err != nil {
			b.Fatal(err)
		}
		n, err := d.c.Follow(ctx, id, 0, io.Discard)
		if err != nil || n != size {
			b.Fatalf("follow: %d, %v", n, err)
		}
	}
}
