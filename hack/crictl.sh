#!/usr/bin/env bash
# Builds crictl (sigs.k8s.io/cri-tools) from the Go module proxy and prints the
# directory that holds it. `kind load docker-image` needs crictl in the node.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

key="${CRICTL_VERSION}-$(recipe_hash "${BASH_SOURCE[0]}")"
src="${SHELLJOB_CACHE}/crictl/src-${key}"
bin="${SHELLJOB_CACHE}/crictl/${key}/bin"

build() {
  mkdir -p "${src}" "${bin}"
  cat > "${src}/go.mod" <<MOD
module shelljob.dev/crictl-build

go $(go env GOVERSION | sed -E 's/^go([0-9]+\.[0-9]+).*/\1/')

require sigs.k8s.io/cri-tools ${CRICTL_VERSION}
MOD
  printf '//go:build tools\n\npackage tools\n\nimport _ "sigs.k8s.io/cri-tools/cmd/crictl"\n' > "${src}/tools.go"
  (cd "${src}" && go mod tidy && CGO_ENABLED=0 go build -trimpath \
    -ldflags "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=${CRICTL_VERSION#v}" \
    -o "${bin}/crictl.tmp" sigs.k8s.io/cri-tools/cmd/crictl)
  mv "${bin}/crictl.tmp" "${bin}/crictl"
}

ensure() {
  if [[ -x "${bin}/crictl" ]]; then
    log "✔ crictl ${CRICTL_VERSION} (cached)"
  else
    step "build crictl ${CRICTL_VERSION}" build
  fi
}

with_lock "crictl-${key}" ensure
echo "${bin}"
