#!/usr/bin/env bash
# Builds Kubernetes binaries from the Go module proxy and prints the directory
# that holds them. `go install k8s.io/kubernetes/cmd/X@v` is refused because of
# the module's replace directives, so a generated wrapper module requires
# k8s.io/kubernetes and replaces each staging module with its published version.
#
# usage: hack/kube-binaries.sh [COMPONENT...]   (default: all seven)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ALL=(kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubelet kubeadm kubectl)
components=("$@")
[[ ${#components[@]} -gt 0 ]] || components=("${ALL[@]}")

staging_version="v0.${KUBE_VERSION#v1.}"
key="${KUBE_VERSION}-$(recipe_hash "${BASH_SOURCE[0]}")"
src="${SHELLJOB_CACHE}/kube/src-${key}"
bin="${SHELLJOB_CACHE}/kube/${key}/bin"

wrapper_module() {
  mkdir -p "${src}"
  local gomod
  gomod="$(cd "${src}" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@${KUBE_VERSION}" | jq -r .GoMod)"
  {
    echo "module shelljob.dev/kube-build"
    echo
    echo "go $(go env GOVERSION | sed -E 's/^go([0-9]+\.[0-9]+).*/\1/')"
    echo
    echo "require k8s.io/kubernetes ${KUBE_VERSION}"
    echo
    # Staging modules are required at v0.0.0 and replaced by local paths upstream.
    grep -E '^\s+k8s\.io/[a-z0-9-]+ v0\.0\.0$' "${gomod}" | awk '{print $1}' | grep -v '/sample-' | sort -u |
      while read -r m; do echo "replace ${m} => ${m} ${staging_version}"; done
  } > "${src}/go.mod"
  {
    echo "//go:build tools"
    echo
    echo "package tools"
    echo
    echo "import ("
    for c in "${ALL[@]}"; do echo "	_ \"k8s.io/kubernetes/cmd/${c}\""; done
    echo ")"
  } > "${src}/tools.go"
  (cd "${src}" && go mod tidy)
}

build_one() {
  local c="$1" pkg=k8s.io/component-base/version cgo=k8s.io/client-go/pkg/version
  local major minor
  major="$(echo "${KUBE_VERSION#v}" | cut -d. -f1)"
  minor="$(echo "${KUBE_VERSION#v}" | cut -d. -f2)"
  local x="" p
  for p in "${pkg}" "${cgo}"; do
    x+=" -X ${p}.gitVersion=${KUBE_VERSION} -X ${p}.gitMajor=${major} -X ${p}.gitMinor=${minor}"
    x+=" -X ${p}.gitTreeState=clean -X ${p}.buildDate=1970-01-01T00:00:00Z"
  done
  (cd "${src}" && CGO_ENABLED=0 go build -trimpath -tags selinux,notest,grpcnotrace \
    -ldflags "-s -w${x}" -o "${bin}/${c}.tmp" "k8s.io/kubernetes/cmd/${c}")
  mv "${bin}/${c}.tmp" "${bin}/${c}"
}

ensure() {
  [[ -f "${src}/go.sum" ]] || step "kubernetes ${KUBE_VERSION}: wrapper module" wrapper_module
  mkdir -p "${bin}"
  local c
  for c in "${components[@]}"; do
    if [[ -x "${bin}/${c}" ]]; then
      log "✔ ${c} ${KUBE_VERSION} (cached)"
    else
      step "build ${c} ${KUBE_VERSION}" build_one "${c}"
    fi
  done
}

with_lock "kube-${key}" ensure
echo "${bin}"
