package cli

import (
	"encoding/base64"
	"io"

	"golang.org/x/term"
)

// fder is a stream backed by a file descriptor, such as *os.File.
type fder interface{ Fd() uintptr }

// isTerminal tells whether s is a terminal. Buffers and pipes are not.
func isTerminal(s any) bool {
	f, ok := s.(fder)
	return ok && term.IsTerminal(int(f.Fd()))
}

// kittyChunk is the most base64 bytes the kitty graphics protocol takes in
// one escape sequence.
const kittyChunk = 4096

// writeKitty shows a PNG image inline with the kitty graphics protocol, but
// only when w is a terminal: in a file or a pipe the escape sequences
// would be a blob of base64 in the captured output. It reports whether it
// wrote anything.
func writeKitty(w io.Writer, png []byte) (bool, error) {
	if !isTerminal(w) {
		return false, nil
	}
	data := base64.StdEncoding.EncodeToString(png)
	for first := true; first || data != ""; first = false {
		n := min(kittyChunk, len(data))
		chunk := data[:n]
		data = data[n:]
		more := "0"
		if data != "" {
			more = "1"
		}
		head := "\x1b_Gm=" + more
		if first {
			head = "\x1b_Gf=100,a=T,m=" + more
		}
		if _, err := io.WriteString(w, head+";"+chunk+"\x1b\\"); err != nil {
			return true, err
		}
	}
	_, err := io.WriteString(w, "\n")
	return true, err
}
