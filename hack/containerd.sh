#!/usr/bin/env bash
# Builds stock containerd 2 (containerd, containerd-shim-runc-v2, ctr) from
# the Go module proxy and prints the directory that holds them: static, no
# cgo, unpatched, the version kind's own node image carries. shelljob is
# proven on what users run, so nothing here changes containerd's behaviour.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

key="${CONTAINERD_VERSION}-$(recipe_hash "${BASH_SOURCE[0]}")"
src="${SHELLJOB_CACHE}/containerd/src-${key}"
bin="${SHELLJOB_CACHE}/containerd/${key}/bin"
CMDS=(containerd containerd-shim-runc-v2 ctr)

build() {
  rm -rf "${src}"
  mkdir -p "${src}" "${bin}"
  cat > "${src}/go.mod" <<MOD
module shelljob.dev/containerd-build

go $(go env GOVERSION | sed -E 's/^go([0-9]+\.[0-9]+).*/\1/')

require github.com/containerd/containerd/v2 ${CONTAINERD_VERSION}
MOD
  {
    printf '//go:build tools\n\npackage tools\n\nimport (\n'
    local c
    for c in "${CMDS[@]}"; do printf '\t_ "github.com/containerd/containerd/v2/cmd/%s"\n' "${c}"; done
    printf ')\n'
  } > "${src}/tools.go"
  (cd "${src}" && go mod tidy)
  local pkg=github.com/containerd/containerd/v2 tags="urfave_cli_no_docs osusergo netgo static_build no_btrfs no_devmapper no_zfs no_aufs"
  local ldflags="-s -w -X ${pkg}/version.Version=${CONTAINERD_VERSION} -X ${pkg}/version.Package=github.com/containerd/containerd/v2"
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
