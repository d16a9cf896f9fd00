package agentapi

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestFollowFramesRoundTrip(t *testing.T) {
	var wire bytes.Buffer
	fw := NewFrameWriter(&wire)
	_ = fw.Data([]byte("head\n"))
	_ = fw.Gap(1000)
	_ = fw.Data([]byte("tail"))
	_ = fw.Data(nil)
	_ = fw.AfterStop(7)
	_ = fw.End(100 + 5 + 1000 + 4 + 7)

	want := FollowMagic + "d 5\nhead\ng 1000\nd 4\ntaild 0\ns 7\ne 1116\n"
	if wire.String() != want {
		t.Fatalf("wire %q, want %q", wire.String(), want)
	}
	var text bytes.Buffer
	n, err := ReadFollow(&wire, 100, &text)
	if err != nil || n != 1116 {
		t.Fatalf("read: %d, %v", n, err)
	}
	if got := text.String(); got != "head\n"+GapLine(1000)+"tail"+AfterStopLine(7) {
		t.Errorf("text %q", got)
	}
}

// Keepalives, the first frame included, carry nothing and move no offset.
func TestFollowKeepalives(t *testing.T) {
	var wire bytes.Buffer
	fw := NewFrameWriter(&wire)
	_ = fw.Keepalive()
	_ = fw.Data([]byte("ab"))
	_ = fw.Keepalive()
	_ = fw.Keepalive()
	_ = fw.End(2)
	if want := FollowMagic + "d 0\nd 2\nabd 0\nd 0\ne 2\n"; wire.String() != want {
		t.Fatalf("wire %q, want %q", wire.String(), want)
	}
	var text bytes.Buffer
	n, err := ReadFollow(&wire, AwaitStart, &text)
	if err != nil || n != 2 || text.String() != "ab" {
		t.Fatalf("read: %d, %q, %v", n, text.String(), err)
	}
	n, err = ReadFollow(strings.NewReader(FollowMagic+"d 0\nd 0\n"), 7, io.Discard)
	if n != 7 || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("cut after keepalives: %d, %v", n, err)
	}
}

func TestReadFollowErrors(t *testing.T) {
	tests := map[string]struct {
		wire   string
		offset int64
		is     error
	}{
		"empty":         {"", 0, io.ErrUnexpectedEOF},
		"cut in magic":  {FollowMagic[:5], 0, io.ErrUnexpectedEOF},
		"no end":        {FollowMagic + "d 2\nab", 2, io.ErrUnexpectedEOF},
		"cut in data":   {FollowMagic + "d 5\nab", 2, io.ErrUnexpectedEOF},
		"other stream":  {"HTTP/1.1 500 Internal Server Error\n", 0, ErrProtocol},
		"bad kind":      {FollowMagic + "z 1\n", 0, ErrProtocol},
		"exit too big":  {FollowMagic + "x 70000\n", 0, ErrProtocol},
		"exit not JSON": {FollowMagic + "x 2\nab" + "e 0\n", 0, ErrProtocol},
		"exit no exit":  {FollowMagic + `x 18` + "\n" + `{"type":"started"}` + "e 0\n", 0, ErrProtocol},
		"cut in exit":   {FollowMagic + "x 30\n{", 0, io.ErrUnexpectedEOF},
		"bad number":    {FollowMagic + "d -1\n", 0, ErrProtocol},
		"short header":  {FollowMagic + "d\n", 0, ErrProtocol},
		"wrong end":     {FollowMagic + "d 1\na" + "e 5\n", 1, ErrProtocol},
		"text not data": {FollowMagic + "d 1x\n", 0, ErrProtocol},
	}
	for name, tc := range tests {
		n, err := ReadFollow(strings.NewReader(tc.wire), 0, io.Discard)
		if !errors.Is(err, tc.is) {
			t.Errorf("%s: %v, want %v", name, err, tc.is)
		}
		if n != tc.offset {
			t.Errorf("%s: offset %d, want %d", name, n, tc.offset)
		}
	}
}

// The x frame moves no offset, reaches a writer that is an ExitSink
// through the text sink, and is dropped by one that is not.
func TestFollowExit(t *testing.T) {
	code := 3
	var wire bytes.Buffer
	fw := NewFrameWriter(&wire)
	_ = fw.Data([]byte("out"))
	_ = fw.Exit(Event{Type: EventExited, Job: "j", ExitCode: &code, Files: &Files{Count: 1, Bytes: 2}})
	_ = fw.End(3)
	if !strings.HasPrefix(wire.String(), FollowMagic+"d 3\nout"+"x ") || !strings.HasSuffix(wire.String(), "}e 3\n") {
		t.Fatalf("wire %q", wire.String())
	}
	var out bytes.Buffer
	got := ExitWriter{Writer: &out}
	n, err := ReadFollow(bytes.NewReader(wire.Bytes()), 0, &got)
	if err != nil || n != 3 || out.String() != "out" {
		t.Fatalf("read: %d, %q, %v", n, out.String(), err)
	}
	if e := got.Exited; e == nil || e.ExitCode == nil || *e.ExitCode != 3 || e.Files.Count != 1 {
		t.Errorf("exit %+v", e)
	}
	var text bytes.Buffer
	if n, err := ReadFollow(bytes.NewReader(wire.Bytes()), 0, &text); err != nil || n != 3 || text.String() != "out" {
		t.Errorf("a reader that is no ExitSink: %d, %q, %v", n, text.String(), err)
	}
}

func TestExitErrors(t *testing.T) {
	for code, want := range map[int]error{
		ExitUnknownJob: ErrUnknownJob, ExitBusy: ErrBusy, ExitStarted: ErrStarted, ExitProtocol: ErrProtocol,
		ExitUsage: ErrUsage, ExitAttached: ErrAttached, 0: nil, 1: nil, 137: nil,
	} {
		if got := ExitError(code); got != want {
			t.Errorf("ExitError(%d) = %v, want %v", code, got, want)
		}
	}
}

func FuzzReadFollow(f *testing.F) {
	f.Add([]byte(FollowMagic + "d 5\nhello" + "g 3\n" + "s 2\n" + "e 10\n"))
	f.Add([]byte(FollowMagic + "d 99999999999\nx"))
	f.Add([]byte(FollowMagic))
	f.Fuzz(func(t *testing.T, wire []byte) {
		var out bytes.Buffer
		n, err := ReadFollow(bytes.NewReader(wire), 0, &out)
		if n < 0 {
			t.Fatalf("offset %d", n)
		}
		if err == nil && !bytes.HasPrefix(wire, []byte(FollowMagic)) {
			t.Fatal("accepted a stream without the magic")
		}
	})
}
