package agentapi

import (
	"bytes"
	"crypto/rand"
	"strings"
	"testing"
)

// TestPieceDeflater: text is sent compressed and inflates back whole;
// random bytes are sent as they are, and the pieces after them are not
// tried for deflateGiveUp pieces.
func TestPieceDeflater(t *testing.T) {
	var d PieceDeflater
	text := []byte(strings.Repeat("total 48\ndrwxr-xr-x 2 shell shell 4096 Dec  5 04:40 .\n", 500))
	z, deflated := d.Piece(text)
	if !deflated || len(z) > len(text)/4 {
		t.Fatalf("text: deflated %v, %d bytes of %d", deflated, len(z), len(text))
	}
	var back bytes.Buffer
	if err := Inflate(&back, z); err != nil || !bytes.Equal(back.Bytes(), text) {
		t.Fatalf("text inflated to %d bytes, %v", back.Len(), err)
	}

	random := make([]byte, 32<<10)
	_, _ = rand.Read(random)
	if p, deflated := d.Piece(random); deflated || !bytes.Equal(p, random) {
		t.Fatalf("random bytes: deflated %v, %d bytes", deflated, len(p))
	}
	for i := range deflateGiveUp {
		if _, deflated := d.Piece(text); deflated {
			t.Fatalf("piece %d after random bytes was tried", i)
		}
	}
	if _, deflated := d.Piece(text); !deflated {
		t.Error("text after the pause is not deflated")
	}

	if err := Inflate(&back, []byte("not deflate")); err == nil {
		t.Error("a corrupt piece inflated")
	}
}
