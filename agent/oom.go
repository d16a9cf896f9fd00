package agent

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// DefaultCgroupRoot is where a container sees its own cgroups.
const DefaultCgroupRoot = "/sys/fs/cgroup"

// oomKills reads how many processes the kernel's out-of-memory killer has
// killed in the agent's memory cgroup, which is the worker container's:
// memory.events under cgroup v2, memory/memory.oom_control under v1. ok is
// false where neither has the counter.
func oomKills(root string) (n int64, ok bool) {
	for _, name := range []string{"memory.events", filepath.Join("memory", "memory.oom_control")} {
		if n, ok := readCounter(filepath.Join(root, name), "oom_kill"); ok {
			return n, true
		}
	}
	return 0, false
}

// readCounter reads the "key value" line of key in a cgroup file.
func readCounter(path, key string) (int64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, found := strings.Cut(sc.Text(), " ")
		if !found || k != key {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		return n, err == nil
	}
	return 0, false
}
