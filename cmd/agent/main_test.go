package main

import (
	"debug/elf"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"shelljob.dev/shelljob/internal/agentapi"
)

// TestStaticBinary builds the agent as the worker image gets it and checks
// that it needs no dynamic loader: the image may have none that fits.
func TestStaticBinary(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "shelljob-agent")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("dynamically linked: has %v", p.Type)
		}
	}
	out, err := exec.Command(bin, "frobnicate").CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != agentapi.ExitUsage || !strings.Contains(string(out), "usage:") {
		t.Errorf("unknown subcommand: %v\n%s", err, out)
	}
}
