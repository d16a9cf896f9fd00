package agent

import (
	"os/exec"
	"syscall"
	"testing"
)

// TestForkUsersSkipLive: Fork users come in turn, wrap around, and skip a
// user a live process runs as; one an earlier run gave out comes after.
func TestForkUsersSkipLive(t *testing.T) {
	if why := IsolationImpossible(); why != "" {
		t.Skipf("no process can run as another user here: %s", why)
	}
	sleeper := exec.Command("sleep", "100")
	sleeper.SysProcAttr = &syscall.SysProcAttr{Credential: cred{ForkUIDBase, ForkUIDBase}.sys()}
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = sleeper.Process.Kill()
		_ = sleeper.Wait()
	})
	// Other test binaries of go test ./... run jobs as Fork users too: only
	// the sleeper's user counts here, and only while /proc shows it live.
	u := &users{forks: DefaultForkUIDs, next: ForkUIDCount - 1, live: func() map[int]bool {
		return map[int]bool{ForkUIDBase: liveUIDs()[ForkUIDBase]}
	}}
	var got []int
	for range 3 {
		c, err := u.fork()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, c.uid)
	}
	u.used(ForkUIDBase + 10)
	u.used(ForkUIDBase + 5) // below the next: no step back
	c, err := u.fork()
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, c.uid)
	want := []int{ForkUIDBase + ForkUIDCount - 1, ForkUIDBase + 1, ForkUIDBase + 2, ForkUIDBase + 11}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("users %v, want %v", got, want)
		}
	}
}
