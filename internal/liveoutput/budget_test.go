package liveoutput

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// Outputs that share a budget keep their heads within it: one that finds
// it spent keeps its tail alone, and says it did not keep all; Release
// gives the memory back to the next.
func TestBudgetSharedByHeads(t *testing.T) {
	b := NewBudget(4 << 10)
	opts := Options{HeadBytes: 4 << 10, TailBytes: 16, Budget: b}
	first, second := New(opts), New(opts)
	first.Write(Stdout, []byte(strings.Repeat("a", 3<<10)))
	if !first.KeptAll() {
		t.Errorf("first: 3 KiB in a 4 KiB head, KeptAll false")
	}
	second.Write(Stdout, []byte(strings.Repeat("b", 2<<10)))
	if b.Used() > b.Size() {
		t.Fatalf("used %d of %d", b.Used(), b.Size())
	}
	if second.KeptAll() {
		t.Errorf("second: 2 KiB with 1 KiB of budget left and a 16-byte tail, KeptAll true")
	}
	if got := second.FinalText(false); !strings.Contains(got, "bytes not kept") || !strings.HasSuffix(got, strings.Repeat("b", 16)) {
		t.Errorf("second's final %q, want its head, the not-kept line and its tail", got)
	}
	first.Release()
	second.Release()
	if b.Used() != 0 {
		t.Errorf("used %d after both released, want 0", b.Used())
	}
	third := New(opts)
	third.Write(Stdout, []byte(strings.Repeat("c", 4<<10)))
	if !third.KeptAll() || third.FinalText(false) != strings.Repeat("c", 4<<10) {
		t.Errorf("third: the released budget was not there again")
	}
}

// Whatever the writes, the heads' memory stays within what the budget
// granted, and the budget within its size.
func TestBudgetBoundsHeadMemory(t *testing.T) {
	b := NewBudget(100 << 10)
	rng := rand.New(rand.NewPCG(1, 2))
	var outs []*Output
	for range 40 {
		outs = append(outs, New(Options{HeadBytes: 64 << 10, TailBytes: 1 << 10, Budget: b}))
	}
	for range 4000 {
		o := outs[rng.IntN(len(outs))]
		o.Write(Stream(rng.IntN(2)), make([]byte, rng.IntN(3000)))
		var held int
		for _, o := range outs {
			for _, s := range o.streams {
				held += cap(s.head)
			}
		}
		if used := b.Used(); used > b.Size() || int64(held) > used {
			t.Fatalf("heads hold %d bytes, the budget granted %d of %d", held, used, b.Size())
		}
		if rng.IntN(50) == 0 {
			o.Release()
		}
	}
}
