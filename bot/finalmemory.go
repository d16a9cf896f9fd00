package bot

import (
	"context"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
)

// DefaultFinalMemory is Config.FinalMemory's default: eight finals that
// upload a file at once.
const DefaultFinalMemory = 8 * uploadMemory

// What a final holds while it is delivered. A final from memory holds its
// text, built from at most the output's kept start and preview window
// (keptBytes and liveoutput.DefaultPreviewBytes) with every byte escaped
// at worst, and a few copies of it on the way out. One that uploads (a
// long output's .txt, the $SHELLJOB_OUT files) holds gotd's upload part
// (512 KiB), its encoding and encryption, and the pipes from the agent:
// the output itself streams through.
const (
	textFinalMemory = 1 << 20
	uploadMemory    = 2 << 20
)

// finalMemory is the memory the finals being delivered share
// (Config.FinalMemory): a final waits until there is room for it, in the
// order they came.
type finalMemory struct {
	size int64
	sem  *semaphore.Weighted
	used atomic.Int64
}

func newFinalMemory(size int64) *finalMemory {
	return &finalMemory{size: size, sem: semaphore.NewWeighted(size)}
}

// take waits until n bytes are free, or ctx ends, and returns what gives
// them back. A final bigger than the whole budget takes all of it.
func (m *finalMemory) take(ctx context.Context, n int64) (release func(), err error) {
	n = min(n, m.size)
	if err := m.sem.Acquire(ctx, n); err != nil {
		return nil, err
	}
	m.used.Add(n)
	return func() {
		m.used.Add(-n)
		m.sem.Release(n)
	}, nil
}

// Used is how many bytes the finals being delivered hold.
func (m *finalMemory) Used() int64 { return m.used.Load() }
