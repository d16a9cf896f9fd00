package agentapi

import (
	"encoding/json"
	"fmt"
	"io"
)

// DecodeEvents reads the event stream, Event JSON lines, from r and hands
// each event to handle, keepalives left out, until r ends: then it returns
// io.EOF.
func DecodeEvents(r io.Reader, handle func(Event)) error {
	dec := json.NewDecoder(r)
	for {
		var e Event
		if err := dec.Decode(&e); err != nil {
			if err == io.EOF {
				return io.EOF
			}
			return fmt.Errorf("event stream: %w", err)
		}
		if e.Type != EventKeepalive {
			handle(e)
		}
	}
}
