#!/usr/bin/env bash
# Builds stock runc (RUNC_VERSION, the version kind's own node image
# carries) from the Go module proxy and prints the directory that holds it:
# a static binary with seccomp (cgo against Debian's libseccomp-dev, as
# runc's own `make static` does), unpatched. The kind node runs it in place
# of Debian bookworm's runc 1.1, which cannot run user-namespaced pods
# (hostUsers: false needs runc 1.2 or later).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

key="${RUNC_VERSION}-$(recipe_hash "${BASH_SOURCE[0]}")"
src="${SHELLJOB_CACHE}/runc/src-${key}"
bin="${SHELLJOB_CACHE}/runc/${key}/bin"

build() {
  apt_install gcc libc6-dev libseccomp-dev pkg-config
  rm -rf "${src}"
  mkdir -p "${src}" "${bin}"
  cat > "${src}/go.mod" <<MOD
module shelljob.dev/runc-build

go $(go env GOVERSION | sed -E 's/^go([0-9]+\.[0-9]+).*/\1/')

require github.com/opencontainers/runc ${RUNC_VERSION}
MOD
  printf '//go:build tools\n\npackage tools\n\nimport _ "github.com/opencontainers/runc"\n' > "${src}/tools.go"
  (cd "${src}" && go mod tidy)
  # runc's Makefile, target static: seccomp, netgo and osusergo, a static PIE.
  (cd "${src}" && CGO_ENABLED=1 go build -trimpath -buildmode=pie \
    -tags "seccomp urfave_cli_no_docs netgo osusergo" \
    -ldflags "-X main.gitCommit=${RUNC_VERSION} -linkmode external -extldflags -static-pie" \
    -o "${bin}/runc.tmp" github.com/opencontainers/runc)
  "${bin}/runc.tmp" --version | grep -q "^runc version ${RUNC_VERSION#v}$" || die "the runc built does not say ${RUNC_VERSION}"
  mv "${bin}/runc.tmp" "${bin}/runc"
}

ensure() {
  if [[ -x "${bin}/runc" ]]; then
    log "✔ runc ${RUNC_VERSION} (cached)"
  else
    step "build runc ${RUNC_VERSION}" build
  fi
}

with_lock "runc-${key}" ensure
echo "${bin}"
