package delivery

import "testing"

func TestRouteOf(t *testing.T) {
	for name, tc := range map[string]struct {
		kind     Kind
		newReply bool
		want     Route
	}{
		"no preview":               {NoPreview, false, Reply},
		"no preview, new reply":    {NoPreview, true, Reply},
		"draft":                    {DraftPreview, false, DraftThenMessage},
		"draft, new reply":         {DraftPreview, true, ReplyAfterDraft},
		"edited":                   {EditPreview, false, EditInPlace},
		"edited, new reply":        {EditPreview, true, ReplyThenRemove},
		"a guest answer is edited": {GuestPreview, false, EditInPlace},
	} {
		t.Run(name, func(t *testing.T) {
			if got := RouteOf(tc.kind, tc.newReply); got != tc.want {
				t.Errorf("RouteOf(%v, %v) = %v, want %v", tc.kind, tc.newReply, got, tc.want)
			}
		})
	}
}
