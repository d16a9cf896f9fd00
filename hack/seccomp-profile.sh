#!/usr/bin/env bash
# Prints the path of the worker pods' seccomp profile (a Localhost profile,
# JSON), built once and cached: containerd's own default profile
# (contrib/seccomp of CONTAINERD_VERSION, the RuntimeDefault of its nodes)
# for the worker container's capabilities, plus exactly what the agent
# needs to give each job PID, mount and IPC namespaces of its own under a
# user namespace:
#   - clone with CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNS and CLONE_NEWIPC
#     (the default allows clone with no namespace flag at all);
#   - mount, for the job's own /proc (and its mounts' propagation).
# Still refused as by the default: clone3 (ENOSYS, so that glibc falls back
# to clone), unshare, setns, umount and every other call the default
# refuses. The profile is for the architecture of this machine.
# hack/kind-base-image.sh installs it in the kind node at
# /var/lib/kubelet/seccomp/shelljob/worker.json; on another cluster, put it
# there on every node (README, "Isolation").
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# The worker container's capabilities (controllers/workerpod.go).
CAPS=(CAP_CHOWN CAP_KILL CAP_SETGID CAP_SETUID)

key="${CONTAINERD_VERSION}-$(go env GOARCH)-$(recipe_hash "${BASH_SOURCE[0]}")"
src="${SHELLJOB_CACHE}/seccomp/src-${key}"
out="${SHELLJOB_CACHE}/seccomp/${key}/worker.json"

build() {
  rm -rf "${src}"
  mkdir -p "${src}" "$(dirname "${out}")"
  cat > "${src}/go.mod" <<MOD
module shelljob.dev/seccomp-profile

go $(go env GOVERSION | sed -E 's/^go([0-9]+\.[0-9]+).*/\1/')

require github.com/containerd/containerd/v2 ${CONTAINERD_VERSION}
MOD
  cat > "${src}/main.go" <<'GO'
// Command seccomp-profile prints containerd's default seccomp profile for
// the capabilities in its arguments, with clone allowed to make user, PID,
// mount and IPC namespaces, and mount allowed.
package main

import (
	"encoding/json"
	"log"
	"os"
	"slices"

	"github.com/containerd/containerd/v2/contrib/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

func main() {
	spec := &specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{Bounding: os.Args[1:]}}}
	p := seccomp.DefaultProfile(spec)
	// Namespaces a job may not have: the default's clone rule, narrowed.
	const refused = unix.CLONE_NEWUTS | unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP
	narrowed := false
	for i, s := range p.Syscalls {
		if slices.Equal(s.Names, []string{"clone"}) && len(s.Args) == 1 && s.Args[0].Op == specs.OpMaskedEqual {
			p.Syscalls[i].Args[0].Value = refused
			narrowed = true
		}
	}
	if !narrowed {
		log.Fatal("containerd's default profile has no clone rule of the expected form")
	}
	p.Syscalls = append(p.Syscalls, specs.LinuxSyscall{Names: []string{"mount"}, Action: specs.ActAllow})
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(p); err != nil {
		log.Fatal(err)
	}
}
GO
  (cd "${src}" && go mod tidy && go run . "${CAPS[@]}" > "${out}.tmp")
  jq -e '.syscalls | map(select(.names == ["mount"])) | length == 1' "${out}.tmp" >/dev/null || die "no mount rule in the profile"
  mv "${out}.tmp" "${out}"
}

ensure() {
  if [[ -s "${out}" ]]; then
    log "✔ seccomp profile for containerd ${CONTAINERD_VERSION} (cached)"
  else
    step "seccomp profile from containerd ${CONTAINERD_VERSION}" build
  fi
}

with_lock "seccomp-${key}" ensure
echo "${out}"
