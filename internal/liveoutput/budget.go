package liveoutput

import "sync"

// A Budget is memory shared by the heads of many Outputs (Options.Budget):
// a head grows only by what the budget grants, and Release gives it back.
// An Output whose head the budget cannot grow keeps its tail as usual; what
// falls between is not kept. Its methods are safe for concurrent use.
type Budget struct {
	mu   sync.Mutex
	size int64
	used int64
}

// NewBudget returns a Budget of size bytes.
func NewBudget(size int64) *Budget { return &Budget{size: size} }

// Used returns how many bytes the budget has granted and not got back.
func (b *Budget) Used() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Size returns the budget's size in bytes.
func (b *Budget) Size() int64 { return b.size }

// take grants up to n bytes, and returns how many.
func (b *Budget) take(n int) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	g := max(min(int64(n), b.size-b.used), 0)
	b.used += g
	return int(g)
}

func (b *Budget) give(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= int64(n)
}
