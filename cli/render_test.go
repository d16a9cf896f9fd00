package cli

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

func TestRender(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "out.log")
	if err := os.WriteFile(file, []byte("cut line\n 10%\r\x1b[32m100%\x1b[0m\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		args    []string
		stdin   string
		want    string
		wantErr string
	}{
		"a file": {
			args: []string{"render", file},
			want: "cut line\n100%\n",
		},
		"a file, aligned": {
			args: []string{"render", "--aligned", file},
			want: "100%\n",
		},
		"stdin": {
			args:  []string{"render"},
			stdin: "downloading\r\x1b[Kdone\n\x1b]0;title\x07ok\n",
			want:  "done\nok\n",
		},
		"stdin named -": {
			args:  []string{"render", "-"},
			stdin: "a\x1b[1mb\x1b(B\x1b[m",
			want:  "ab",
		},
		"stdin, aligned, only blanks after the newline": {
			args:  []string{"render", "--aligned"},
			stdin: `"v"}` + "\n",
			want:  `"v"}` + "\n",
		},
		"bytes that are not UTF-8, as the chat's final shows them": {
			args:  []string{"render"},
			stdin: "\xff\xfe\xfdok",
			want:  `\xff\xfe\xfdok`,
		},
		"bytes that are not UTF-8 in a frame": {
			args:  []string{"render"},
			stdin: "a\xffb 10%\ra\xffb 99%\n",
			want:  `a\xffb 99%` + "\n",
		},
		"a missing file": {
			args:    []string{"render", filepath.Join(dir, "missing")},
			wantErr: "no such file or directory",
		},
		"two files": {
			args:    []string{"render", file, file},
			wantErr: "accepts at most 1 arg(s), received 2",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			cmd := NewCmd(Options{IOStreams: genericiooptions.IOStreams{
				In: strings.NewReader(tc.stdin), Out: &out, ErrOut: &errOut,
			}})
			cmd.SetArgs(tc.args)
			err := cmd.Execute()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Execute: %v; stderr: %s", err, errOut.String())
			}
			if diff := cmp.Diff(tc.want, out.String()); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRenderErrorSkipsUsage(t *testing.T) {
	var out, errOut bytes.Buffer
	cmd := NewCmd(Options{IOStreams: genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}})
	cmd.SetArgs([]string{"render", filepath.Join(t.TempDir(), "missing")})
	if err := cmd.Execute(); err == nil {
		t.Fatal("no error for a missing file")
	}
	if strings.Contains(errOut.String(), "Usage:") {
		t.Errorf("usage printed for a failed run:\n%s", errOut.String())
	}
}

// TestRenderCopiesTheInputOnce: a large file is read into one buffer that
// the text shares; nothing else of its size is allocated.
func TestRenderCopiesTheInputOnce(t *testing.T) {
	const size = 16 << 20
	file := filepath.Join(t.TempDir(), "big.log")
	if err := os.WriteFile(file, bytes.Repeat([]byte("0123456789abcde\n"), size/16), 0o644); err != nil {
		t.Fatal(err)
	}
	var n countWriter
	cmd := NewCmd(Options{IOStreams: genericiooptions.IOStreams{In: strings.NewReader(""), Out: &n, ErrOut: io.Discard}})
	cmd.SetArgs([]string{"render", file})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if n != size {
		t.Fatalf("wrote %d bytes, want %d", n, size)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > size*5/4 {
		t.Errorf("allocated %d MiB for a %d MiB input; want one copy", alloc>>20, size>>20)
	}
}

type countWriter int

func (c *countWriter) Write(p []byte) (int, error) { *c += countWriter(len(p)); return len(p), nil }

// WriteString is what *os.File has too: no copy of the text.
func (c *countWriter) WriteString(s string) (int, error) {
	*c += countWriter(len(s))
	return len(s), nil
}
