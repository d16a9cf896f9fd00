#!/usr/bin/env bash
# Builds CoreDNS from the Go module proxy and prints the directory that holds it.
# github.com/coredns/coredns is package main at its module root.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

key="${COREDNS_VERSION}-$(recipe_hash "${BASH_SOURCE[0]}")"
src="${SHELLJOB_CACHE}/coredns/src-${key}"
bin="${SHELLJOB_CACHE}/coredns/${key}/bin"

build() {
  mkdir -p "${src}" "${bin}"
  cat > "${src}/go.mod" <<MOD
module shelljob.dev/coredns-build

go $(go env GOVERSION | sed -E 's/^go([0-9]+\.[0-9]+).*/\1/')

require github.com/coredns/coredns ${COREDNS_VERSION}
MOD
  printf '//go:build tools\n\npackage tools\n\nimport _ "github.com/coredns/coredns"\n' > "${src}/tools.go"
  (cd "${src}" && go mod tidy && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "${bin}/coredns.tmp" github.com/coredns/coredns)
  mv "${bin}/coredns.tmp" "${bin}/coredns"
}

ensure() {
  if [[ -x "${bin}/coredns" ]]; then
    log "✔ coredns ${COREDNS_VERSION} (cached)"
  else
    step "build coredns ${COREDNS_VERSION}" build
  fi
}

with_lock "coredns-${key}" ensure
echo "${bin}"
