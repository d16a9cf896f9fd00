package utf16text

import "testing"

func TestCuts(t *testing.T) {
	cases := map[string]struct {
		s          string
		max        int
		head, tail string
		len        int
	}{
		"ascii":                 {s: "abcdef", max: 4, head: "abcd", tail: "cdef", len: 6},
		"emoji takes two units": {s: "a😀b", max: 2, head: "a", tail: "b", len: 4},
		"emoji fits whole":      {s: "a😀b", max: 3, head: "a😀", tail: "😀b", len: 4},
		"accents take one":      {s: "ééé", max: 2, head: "éé", tail: "éé", len: 3},
		"invalid byte is one":   {s: "a\xffb", max: 2, head: "a\xff", tail: "\xffb", len: 3},
		"nothing fits":          {s: "😀", max: 1, head: "", tail: "", len: 2},
		"zero":                  {s: "abc", max: 0, head: "", tail: "", len: 3},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Head(tc.s, tc.max); got != tc.head {
				t.Errorf("Head = %q, want %q", got, tc.head)
			}
			if got := Tail(tc.s, tc.max); got != tc.tail {
				t.Errorf("Tail = %q, want %q", got, tc.tail)
			}
			if got := Len(tc.s); got != tc.len {
				t.Errorf("Len = %d, want %d", got, tc.len)
			}
		})
	}
}
