package cli

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestReadJob(t *testing.T) {
	cases := map[string]struct {
		in, job, rest string
		err           error // nil: any error when wantErr
		wantErr       bool
	}{
		"a job, then the rest": {in: "uid-1\nmore", job: "uid-1", rest: "more"},
		"the longest job":      {in: strings.Repeat("a", 128) + "\n", job: strings.Repeat("a", 128)},
		"the reader went away": {in: "", err: io.EOF},
		"a cut line":           {in: "uid", err: io.ErrUnexpectedEOF},
		"an empty line":        {in: "\n", wantErr: true},
		"too long":             {in: strings.Repeat("a", 300) + "\n", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job, rest, err := readJob(strings.NewReader(tc.in))
			switch {
			case tc.err != nil || tc.wantErr:
				if err == nil || (tc.err != nil && !errors.Is(err, tc.err)) {
					t.Fatalf("err %v, want %v", err, tc.err)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			b, _ := io.ReadAll(rest)
			if job != tc.job || string(b) != tc.rest {
				t.Errorf("job %q, rest %q; want %q, %q", job, b, tc.job, tc.rest)
			}
		})
	}
}
