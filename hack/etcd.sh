#!/usr/bin/env bash
# Builds etcd from the Go module proxy and prints the directory that holds it.
# go.etcd.io/etcd/server/v3 is package main at its module root.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

key="${ETCD_VERSION}-$(recipe_hash "${BASH_SOURCE[0]}")"
src="${SHELLJOB_CACHE}/etcd/src-${key}"
bin="${SHELLJOB_CACHE}/etcd/${key}/bin"

build() {
  mkdir -p "${src}" "${bin}"
  cat > "${src}/go.mod" <<MOD
module shelljob.dev/etcd-build

go $(go env GOVERSION | sed -E 's/^go([0-9]+\.[0-9]+).*/\1/')

require go.etcd.io/etcd/server/v3 ${ETCD_VERSION}
MOD
  printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' > "${src}/tools.go"
  (cd "${src}" && go mod tidy && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "${bin}/etcd.tmp" go.etcd.io/etcd/server/v3)
  mv "${bin}/etcd.tmp" "${bin}/etcd"
}

ensure() {
  if [[ -x "${bin}/etcd" ]]; then
    log "✔ etcd ${ETCD_VERSION} (cached)"
  else
    step "build etcd ${ETCD_VERSION}" build
  fi
}

with_lock "etcd-${key}" ensure
echo "${bin}"
