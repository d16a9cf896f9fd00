# shellcheck shell=bash
# Common helpers for the hack/ scripts. Source it; do not run it.
set -euo pipefail

# Versions of everything built from source. Bumping one changes its cache key.
KUBE_VERSION="${KUBE_VERSION:-v1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-v3.7.0}"
COREDNS_VERSION="${COREDNS_VERSION:-v1.14.6}"
CRICTL_VERSION="${CRICTL_VERSION:-v1.37.0}"
CONTAINERD_VERSION="${CONTAINERD_VERSION:-v2.3.4}"
RUNC_VERSION="${RUNC_VERSION:-v1.4.3}"
KIND_VERSION="${KIND_VERSION:-v0.33.0}"
DEBIAN_SUITE="${DEBIAN_SUITE:-bookworm}"

# The project's images. IMAGE_TAG is the chart's default appVersion.
IMAGE_TAG="${IMAGE_TAG:-0.1.0}"
OPERATOR_IMAGE="${OPERATOR_IMAGE:-shelljob/operator}"
BOT_IMAGE="${BOT_IMAGE:-shelljob/bot}"
WORKER_IMAGE="${WORKER_IMAGE:-shelljob/worker}"
FAKETG_IMAGE="${FAKETG_IMAGE:-shelljob/faketg}"

# The kind cluster and its node image (the tag gets a hash of its inputs).
KIND_CLUSTER="${KIND_CLUSTER:-shelljob}"
KIND_NODE_REPO="${KIND_NODE_REPO:-shelljob/kind-node}"
# The API server's audit log, on the control-plane node (hack/kind-up.sh).
AUDIT_LOG=/var/log/kubernetes/audit/audit.log

HACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT_DIR="$(cd "${HACK_DIR}/.." && pwd)"

# Everything expensive is cached outside the work tree, so that fresh clones reuse it.
SHELLJOB_CACHE="${SHELLJOB_CACHE:-${XDG_CACHE_HOME:-${HOME}/.cache}/shelljob}"
mkdir -p "${SHELLJOB_CACHE}"

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# step "what" cmd args...: runs a step, printing what it does and how long it took.
step() {
  local what="$1"; shift
  local start=$SECONDS
  log "▶ ${what}"
  "$@"
  # Reached on failure only where errexit is off (if, ||): report and pass it on.
  local rc=$?
  if [[ ${rc} -ne 0 ]]; then
    log "✘ ${what} (failed after $((SECONDS - start)) s)"
    return "${rc}"
  fi
  log "✔ ${what} ($((SECONDS - start)) s)"
}

# recipe_hash FILE...: a short hash of the given files plus the Go version,
# used to key caches so that a changed recipe never reuses a stale result.
recipe_hash() {
  { cat "$@"; go env GOVERSION; } | sha256sum | cut -c1-12
}

# apt_install PKG...: installs the Debian packages that are missing, running
# `apt-get update` first, at most once per run of a script tree.
apt_install() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "${p}" 2>/dev/null | grep -q 'install ok installed' || missing+=("${p}")
  done
  [[ ${#missing[@]} -gt 0 ]] || return 0
  [[ $(id -u) -eq 0 ]] || die "need root to install ${missing[*]}"
  local out="${SHELLJOB_CACHE}/logs/apt.log"
  mkdir -p "${SHELLJOB_CACHE}/logs"
  if [[ -z "${SHELLJOB_APT_UPDATED:-}" ]]; then
    log "apt-get update"
    apt-get update >>"${out}" 2>&1 || { tail -20 "${out}" >&2; die "apt-get update failed"; }
    export SHELLJOB_APT_UPDATED=1
  fi
  log "apt-get install ${missing[*]} (log: ${out})"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >>"${out}" 2>&1 ||
    { tail -20 "${out}" >&2; die "apt-get install ${missing[*]} failed"; }
}

# apt_mirror: the Debian mirror of this machine's apt sources (deb822 or one-line).
apt_mirror() {
  local m
  m="$({ cat /etc/apt/sources.list.d/*.sources 2>/dev/null || true; } | awk -v suite="${DEBIAN_SUITE}" '
    BEGIN {RS = ""; FS = "\n"}
    {u = ""; ok = 0
     for (i = 1; i <= NF; i++) {
       if ($i ~ /^URIs:/) {split($i, a, " "); u = a[2]}
       if ($i ~ /^Suites:/) {n = split($i, b, " "); for (j = 2; j <= n; j++) if (b[j] == suite) ok = 1}
     }
     if (ok && u != "" && u !~ /security/) {print u; exit}}')"
  [[ -n "${m}" ]] || m="$({ cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true; } |
    awk -v suite="${DEBIAN_SUITE}" '$1 == "deb" {for (i = 2; i < NF; i++) if ($i ~ /^[a-z]+:\/\// && $(i + 1) == suite) {print $i; exit}}')"
  [[ -n "${m}" ]] || die "no Debian mirror in the apt sources"
  echo "${m}"
}

# gomod_dir MODULE@VERSION: the module's directory in the module cache, downloaded if needed.
gomod_dir() {
  (cd "${SHELLJOB_CACHE}" && GOFLAGS=-mod=mod go mod download -json "$1" | jq -r .Dir)
}

# image_exists NAME:TAG
image_exists() { docker image inspect "$1" >/dev/null 2>&1; }

# prune_other_tags REPO KEEP: removes the images of REPO other than REPO:KEEP
# (stale cache entries), except those a container still uses.
prune_other_tags() {
  local t
  docker images --format '{{.Repository}}:{{.Tag}}' "$1" | { grep -vxF "$1:$2" || true; } |
    while read -r t; do docker rmi "${t}" >/dev/null 2>&1 && log "removed stale image ${t}" || true; done
}

# with_lock NAME cmd args...: serializes concurrent builds of the same cache entry.
with_lock() {
  local name="$1"; shift
  mkdir -p "${SHELLJOB_CACHE}/locks"
  ( flock 9; "$@" ) 9>"${SHELLJOB_CACHE}/locks/${name}.lock"
}
