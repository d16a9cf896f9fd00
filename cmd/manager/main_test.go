package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseServiceAccounts(t *testing.T) {
	cases := map[string]struct {
		list    string
		want    []string
		wantErr string
	}{
		"empty is none":          {list: ""},
		"one":                    {list: "shell-user", want: []string{"shell-user"}},
		"spaces and empty items": {list: " shell-user, ,ci.runner ,", want: []string{"shell-user", "ci.runner"}},
		"not a DNS subdomain":    {list: "shell-user,Robot_1", wantErr: `ServiceAccount "Robot_1"`},
		"with a namespace":       {list: "kube-system/default", wantErr: `ServiceAccount "kube-system/default"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := parseServiceAccounts(tc.list)
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
