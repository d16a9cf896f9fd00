package pty

import (
	"bytes"
	"io"
	"testing"
	"time"
)

// What is written to the slave comes out of the master, and the size set
// on one side is the other's.
func TestOpen(t *testing.T) {
	master, slave, err := Open()
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	defer master.Close()
	defer slave.Close()
	if err := SetSize(master, 33, 101); err != nil {
		t.Fatal(err)
	}
	if rows, cols, err := Size(slave); err != nil || rows != 33 || cols != 101 {
		t.Errorf("slave size %dx%d, %v; want 33x101", rows, cols, err)
	}
	if _, err := slave.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	got := make(chan []byte, 1)
	go func() {
		b := make([]byte, 64)
		n, _ := master.Read(b)
		got <- b[:n]
	}()
	select {
	case b := <-got:
		// The terminal's line discipline makes \n \r\n.
		if !bytes.Equal(b, []byte("hello\r\n")) {
			t.Errorf("master read %q", b)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("nothing came out of the master")
	}
	// Close ends a Read blocked on the master: it is in the poller.
	ended := make(chan error, 1)
	go func() {
		_, err := master.Read(make([]byte, 1))
		ended <- err
	}()
	time.Sleep(50 * time.Millisecond)
	master.Close()
	select {
	case err := <-ended:
		if err == nil || err == io.EOF {
			t.Errorf("read on a closed master: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end the read")
	}
}
