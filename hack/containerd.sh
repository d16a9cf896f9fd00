#!/usr/bin/env bash
# Builds containerd 2 (containerd, containerd-shim-runc-v2, ctr) from the Go
# module proxy and prints the directory that holds them: static, no cgo, the
# version kind's own node image carries, with two patches (hack/patches/) so
# that an interrupted `kubectl exec` leaves nothing running in the pod:
#   - cri-streaming-exec-cancel.patch: the CRI streaming server cancels the
#     exec when its client's connection closes (upstream never does: the
#     request context outlives the hijacked connection);
#   - containerd-exec-kill-group.patch: the shim's SIGKILL of an exec (which
#     containerd sends on that cancel, or on a timeout) goes to the exec's
#     process group, so `sh -c 'sleep 100'` leaves no sleep behind.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PATCHES=("${HACK_DIR}/patches/containerd-exec-kill-group.patch" "${HACK_DIR}/patches/cri-streaming-exec-cancel.patch")
key="${CONTAINERD_VERSION}-$(recipe_hash "${BASH_SOURCE[0]}" "${PATCHES[@]}")"
src="${SHELLJOB_CACHE}/containerd/src-${key}"
bin="${SHELLJOB_CACHE}/containerd/${key}/bin"
CMDS=(containerd containerd-shim-runc-v2 ctr)

# patched_copy MODULE@VERSION DIR PATCH: a writable copy of a module with a patch applied.
patched_copy() {
  rm -rf "$2"
  cp -r "$(gomod_dir "$1")" "$2"
  chmod -R u+w "$2"
  patch -s -p1 -d "$2" < "$3"
}

build() {
  apt_install patch
  rm -rf "${src}"
  mkdir -p "${src}" "${bin}"
  local ctrd="github.com/containerd/containerd/v2@${CONTAINERD_VERSION}" streaming
  patched_copy "${ctrd}" "${src}/containerd" "${PATCHES[0]}"
  streaming="$(awk '$1 == "k8s.io/cri-streaming" {print $2}' "${src}/containerd/go.mod")"
  [[ -n "${streaming}" ]] || die "containerd ${CONTAINERD_VERSION} does not require k8s.io/cri-streaming"
  patched_copy "k8s.io/cri-streaming@${streaming}" "${src}/cri-streaming" "${PATCHES[1]}"
  cat > "${src}/go.mod" <<MOD
module shelljob.dev/containerd-build

go $(go env GOVERSION | sed -E 's/^go([0-9]+\.[0-9]+).*/\1/')

require (
	github.com/containerd/containerd/v2 ${CONTAINERD_VERSION}
	k8s.io/cri-streaming ${streaming}
)

replace (
	github.com/containerd/containerd/v2 => ./containerd
	k8s.io/cri-streaming => ./cri-streaming
)
MOD
  {
    printf '//go:build tools\n\npackage tools\n\nimport (\n'
    local c
    for c in "${CMDS[@]}"; do printf '\t_ "github.com/containerd/containerd/v2/cmd/%s"\n' "${c}"; done
    printf ')\n'
  } > "${src}/tools.go"
  (cd "${src}" && go mod tidy)
  local pkg=github.com/containerd/containerd/v2 tags="urfave_cli_no_docs osusergo netgo static_build no_btrfs no_devmapper no_zfs no_aufs"
  local ldflags="-s -w -X ${pkg}/version.Version=${CONTAINERD_VERSION}+shelljob -X ${pkg}/version.Package=github.com/containerd/containerd/v2"
  for c in "${CMDS[@]}"; do
    local t="${tags}"
    [[ "${c}" != containerd-shim-runc-v2 ]] || t+=" no_grpc"
    (cd "${src}" && CGO_ENABLED=0 go build -trimpath -tags "${t}" -ldflags "${ldflags}" -o "${bin}/${c}.tmp" "${pkg}/cmd/${c}")
  done
  for c in "${CMDS[@]}"; do mv "${bin}/${c}.tmp" "${bin}/${c}"; done
}

ensure() {
  if [[ -x "${bin}/containerd" && -x "${bin}/containerd-shim-runc-v2" && -x "${bin}/ctr" ]]; then
    log "✔ containerd ${CONTAINERD_VERSION} (cached)"
  else
    step "build containerd ${CONTAINERD_VERSION}" build
  fi
}

with_lock "containerd-${key}" ensure
echo "${bin}"
