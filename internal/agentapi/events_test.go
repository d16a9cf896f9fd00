package agentapi

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestDecodeEvents(t *testing.T) {
	stream := `{"type":"started","job":"a","time":"2026-12-02T00:00:00Z"}
{"type":"keepalive","time":"2026-12-02T00:00:20Z"}
{"type":"synced","time":"2026-12-02T00:00:00Z"}
`
	var got []EventType
	err := DecodeEvents(strings.NewReader(stream), func(e Event) { got = append(got, e.Type) })
	if !errors.Is(err, io.EOF) || len(got) != 2 || got[0] != EventStarted || got[1] != EventSynced {
		t.Errorf("got %v, %v; want started and synced, no keepalive, then io.EOF", got, err)
	}
	err = DecodeEvents(strings.NewReader(`{"type":"started"}`+"\nnot json\n"), func(Event) {})
	if err == nil || errors.Is(err, io.EOF) {
		t.Errorf("a broken stream: %v, want an error that is not io.EOF", err)
	}
}
