package agentapi_test

import (
	"bytes"
	"testing"

	"shelljob.dev/shelljob/internal/agentapi"
)

// A Skipper passes on a stream from its offset, however the writes split
// it.
func TestSkipper(t *testing.T) {
	stream := []byte("0123456789abcdefghij")
	for _, skip := range []int64{0, 1, 7, 19, 20, 25} {
		for _, chunk := range []int{1, 3, 8, len(stream)} {
			var out bytes.Buffer
			s := &agentapi.Skipper{W: &out, Skip: skip}
			for rest := stream; len(rest) > 0; {
				n := min(chunk, len(rest))
				if m, err := s.Write(rest[:n]); m != n || err != nil {
					t.Fatalf("skip %d, chunk %d: write = %d, %v", skip, chunk, m, err)
				}
				rest = rest[n:]
			}
			if want := stream[min(skip, int64(len(stream))):]; !bytes.Equal(out.Bytes(), want) {
				t.Errorf("skip %d, chunk %d: %q, want %q", skip, chunk, out.Bytes(), want)
			}
		}
	}
}
