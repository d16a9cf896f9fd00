#!/usr/bin/env bash
# Creates the kind cluster KIND_CLUSTER (one node) offline, unless it already
# runs from the current node image, waits until the node and CoreDNS are
# ready, loads the project's images and prints the kubeconfig context.
# Everything it needs is built locally and cached: the Docker engine
# (hack/docker-engine.sh), the node image (hack/kind-node-image.sh) and the
# project's images (hack/images.sh). A cluster left stopped (after a reboot)
# or made from another node image is recreated.
# env: KIND (the kind binary), LOCALBIN (where to link kubectl), KUBECONFIG.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

KIND="${KIND:-${ROOT_DIR}/bin/kind}"
LOCALBIN="${LOCALBIN:-${ROOT_DIR}/bin}"
context="kind-${KIND_CLUSTER}"
node_container="${KIND_CLUSTER}-control-plane"
[[ -x "${KIND}" ]] || die "no kind at ${KIND} (make kind-up builds it)"

kubectl() { "${LOCALBIN}/kubectl" --context "${context}" "$@"; }

link_kubectl() {
  local kube
  kube="$("${HACK_DIR}/kube-binaries.sh" kubectl)"
  mkdir -p "${LOCALBIN}"
  ln -sf "${kube}/kubectl" "${LOCALBIN}/kubectl"
}

node_image() { node_image="$("${HACK_DIR}/kind-node-image.sh")"; }

project_images() {
  local out
  out="$("${HACK_DIR}/images.sh")"
  images=()
  [[ -z "${out}" ]] || mapfile -t images <<<"${out}"
}

cluster_config() {
  cat <<YAML
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
networking:
  # kube-proxy without iptables-legacy; the node image carries nft.
  kubeProxyMode: nftables
kubeadmConfigPatches:
- |
  kind: KubeletConfiguration
  # Kubernetes >= 1.35 refuses cgroup v1 hosts unless told otherwise.
  failCgroupV1: false
nodes:
- role: control-plane
YAML
}

# answers: the API server of a running node answers within 60 s (a node
# container that the engine restarts after a reboot needs a moment).
answers() {
  "${KIND}" export kubeconfig --name "${KIND_CLUSTER}" >/dev/null 2>&1 || return 1
  for _ in $(seq 1 30); do
    kubectl get --raw /readyz >/dev/null 2>&1 && return 0
    sleep 2
  done
  return 1
}

create_cluster() {
  if "${KIND}" get clusters 2>/dev/null | grep -qx "${KIND_CLUSTER}"; then
    "${KIND}" delete cluster --name "${KIND_CLUSTER}"
  fi
  "${KIND}" create cluster --name "${KIND_CLUSTER}" --image "${node_image}" --config <(cluster_config)
  prune_other_tags "${node_image%%:*}" "${node_image##*:}"
}

# ensure_cluster: keeps a cluster that runs from the current node image and
# answers (reused=1), and (re)creates any other.
ensure_cluster() {
  reused=0
  if "${KIND}" get clusters 2>/dev/null | grep -qx "${KIND_CLUSTER}"; then
    local state image
    state="$(docker inspect -f '{{.State.Status}}' "${node_container}" 2>/dev/null || echo missing)"
    image="$(docker inspect -f '{{.Config.Image}}' "${node_container}" 2>/dev/null || true)"
    if [[ "${state}" == running && "${image}" == "${node_image}" ]] && answers; then
      log "cluster ${KIND_CLUSTER} exists and answers: keeping it"
      reused=1
      return 0
    fi
    log "cluster ${KIND_CLUSTER} is ${state} (image ${image:-none}): recreating it"
  fi
  create_cluster
}

wait_node() { kubectl wait --for=condition=Ready node --all --timeout="$1" >&2; }
wait_coredns() { kubectl -n kube-system rollout status deployment/coredns --timeout="$1" >&2; }

# wait_ready: the node and CoreDNS. A kept cluster gets a shorter wait, and is
# recreated if it does not get there.
wait_ready() {
  local t=300s
  [[ ${reused} -eq 0 ]] || t=60s
  if step "node Ready" wait_node "${t}" && step "CoreDNS ready" wait_coredns "${t}"; then
    return 0
  fi
  [[ ${reused} -eq 1 ]] || die "cluster ${KIND_CLUSTER} did not get ready"
  log "the kept cluster did not get ready: recreating it"
  reused=0
  step "kind cluster ${KIND_CLUSTER} (again)" create_cluster
  step "node Ready" wait_node 300s
  step "CoreDNS ready" wait_coredns 300s
}

load_images() {
  if [[ ${#images[@]} -eq 0 ]]; then
    log "no project image to load yet"
    return 0
  fi
  "${KIND}" load docker-image --name "${KIND_CLUSTER}" "${images[@]}"
}

up() {
  local start=$SECONDS
  apt_install jq
  step "Docker engine" "${HACK_DIR}/docker-engine.sh"
  step "kubectl ${KUBE_VERSION} in ${LOCALBIN}" link_kubectl
  step "kind node image" node_image
  step "project images" project_images
  step "kind cluster ${KIND_CLUSTER}" ensure_cluster
  wait_ready
  step "load images: ${images[*]:-none}" load_images
  log "✔ kind cluster ${KIND_CLUSTER} is up ($((SECONDS - start)) s); kubeconfig context: ${context}"
}

# One kind-up or kind-down at a time (e2e, bench and a developer may race).
with_lock "kind-cluster-${KIND_CLUSTER}" up
echo "${context}"
