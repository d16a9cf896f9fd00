#!/usr/bin/env bash
# Creates the kind cluster KIND_CLUSTER (one control-plane node and
# KIND_WORKERS worker nodes, default 1) offline, unless it already runs from
# the current node image with that many nodes, waits until the node and CoreDNS are
# ready, loads the project's images and prints the kubeconfig context.
# Everything it needs is built locally and cached: the Docker engine
# (hack/docker-engine.sh), the node image (hack/kind-node-image.sh) and the
# project's images (hack/images.sh). A cluster left stopped (after a reboot)
# or made from another node image is recreated.
# env: KIND (the kind binary), LOCALBIN (where to link kubectl), KUBECONFIG,
# KIND_WORKERS (worker nodes; 0 for a single node that also runs the pods).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

KIND="${KIND:-${ROOT_DIR}/bin/kind}"
LOCALBIN="${LOCALBIN:-${ROOT_DIR}/bin}"
KIND_WORKERS="${KIND_WORKERS:-1}"
[[ "${KIND_WORKERS}" =~ ^[0-9]+$ ]] || die "KIND_WORKERS must be a number of worker nodes, not '${KIND_WORKERS}'"
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

# cluster_config prints the kind config; every node carries the label
# shelljob.dev/kind-config=HASH ($1) of the config without it, so that a
# kept cluster made from another config is recreated.
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
  # Volume usage is measured every 10 s instead of every minute, so that a
  # worker whose spool outgrows its sizeLimit is evicted soon after.
  volumeStatsAggPeriod: 10s
# etcd's quota at the 8 GiB its documentation suggests as the most, as
# managed control planes run it, not kubeadm's 2 GiB: every write of a
# ShellJob stores its whole command again until the API server compacts
# etcd's history, and the memory bench's bursts of 64 KiB commands filled
# 2 GiB (README, "jobQuota").
- |
  kind: ClusterConfiguration
  etcd:
    local:
      extraArgs:
      - name: quota-backend-bytes
        value: "8589934592"
# The API server's audit log (hack/audit-policy.yaml): who read a job's
# output or console, who created, stopped or approved it. The e2e suite
# reads it from the control-plane node, at AUDIT_LOG.
kubeadmConfigPatchesJSON6902:
- group: kubeadm.k8s.io
  version: v1beta4
  kind: ClusterConfiguration
  patch: |
    - op: add
      path: /apiServer/extraArgs/-
      value: {name: audit-policy-file, value: /etc/kubernetes/audit/policy.yaml}
    - op: add
      path: /apiServer/extraArgs/-
      value: {name: audit-log-path, value: ${AUDIT_LOG}}
    - op: add
      path: /apiServer/extraArgs/-
      value: {name: audit-log-maxsize, value: "100"}
    - op: add
      path: /apiServer/extraArgs/-
      value: {name: audit-log-maxbackup, value: "2"}
    - op: add
      path: /apiServer/extraVolumes
      value:
      - {name: audit-policy, hostPath: /etc/kubernetes/audit, mountPath: /etc/kubernetes/audit, readOnly: true, pathType: DirectoryOrCreate}
      - {name: audit-log, hostPath: ${AUDIT_LOG%/*}, mountPath: ${AUDIT_LOG%/*}, pathType: DirectoryOrCreate}
nodes:
YAML
  local i role
  for ((i = 0; i <= KIND_WORKERS; i++)); do
    role=worker
    [[ ${i} -gt 0 ]] || role=control-plane
    printf -- '- role: %s\n  labels:\n    shelljob.dev/kind-config: "%s"\n' "${role}" "$1"
    [[ ${i} -gt 0 ]] || printf -- '  extraMounts:\n  - {hostPath: "%s", containerPath: /etc/kubernetes/audit/policy.yaml, readOnly: true}\n' "$(audit_policy)"
  done
}

# audit_policy prints the path of a copy of hack/audit-policy.yaml named by
# its hash in the cache, the same for every clone, so that the config's hash
# changes with the policy and not with the clone's path.
audit_policy() {
  local hash dir="${SHELLJOB_CACHE}/kind"
  hash="$(sha256sum < "${HACK_DIR}/audit-policy.yaml" | cut -c1-12)"
  mkdir -p "${dir}"
  [[ -f "${dir}/audit-policy-${hash}.yaml" ]] || cp "${HACK_DIR}/audit-policy.yaml" "${dir}/audit-policy-${hash}.yaml"
  echo "${dir}/audit-policy-${hash}.yaml"
}

config_hash() { cluster_config "" | sha256sum | cut -c1-12; }

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
  "${KIND}" create cluster --name "${KIND_CLUSTER}" --image "${node_image}" --config <(cluster_config "$(config_hash)")
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
    local nodes
    nodes="$("${KIND}" get nodes --name "${KIND_CLUSTER}" 2>/dev/null | wc -l)"
    if [[ "${state}" == running && "${image}" == "${node_image}" && "${nodes}" -eq $((KIND_WORKERS + 1)) ]] && answers &&
      [[ "$(kubectl get nodes -l "shelljob.dev/kind-config=$(config_hash)" --no-headers 2>/dev/null | wc -l)" -eq $((KIND_WORKERS + 1)) ]]; then
      log "cluster ${KIND_CLUSTER} exists and answers: keeping it"
      reused=1
      return 0
    fi
    log "cluster ${KIND_CLUSTER} is ${state} (image ${image:-none}, ${nodes} nodes, or another config): recreating it"
  fi
  create_cluster
}

# pod_network: kindnetd's image can't be had here, so do its job: give every
# node a ptp CNI config for the podCIDR the controller manager allocated it,
# and routes to every other node's pods through that node. The node becomes
# Ready once it has its config. Safe to run again (a kept cluster whose node
# containers restarted lost their routes).
pod_network() {
  local names=() cidrs=() ips=() n i j cidr ip
  mapfile -t names < <("${KIND}" get nodes --name "${KIND_CLUSTER}" | sort)
  for n in "${names[@]}"; do
    cidr=""
    for _ in $(seq 1 60); do
      cidr="$(kubectl get node "${n}" -o jsonpath='{.spec.podCIDR}' 2>/dev/null || true)"
      [[ -z "${cidr}" ]] || break
      sleep 1
    done
    [[ -n "${cidr}" ]] || die "node ${n} got no podCIDR"
    ip="$(kubectl get node "${n}" -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')"
    cidrs+=("${cidr}") ips+=("${ip}")
  done
  for i in "${!names[@]}"; do
    docker exec -i "${names[i]}" sh -c 'cat > /etc/cni/net.d/10-shelljob.conflist.tmp && mv /etc/cni/net.d/10-shelljob.conflist.tmp /etc/cni/net.d/10-shelljob.conflist' <<JSON
{"cniVersion":"0.3.1","name":"shelljob","plugins":[{"type":"ptp","ipMasq":true,"ipam":{"type":"host-local","ranges":[[{"subnet":"${cidrs[i]}"}]],"routes":[{"dst":"0.0.0.0/0"}]}},{"type":"portmap","capabilities":{"portMappings":true}}]}
JSON
    for j in "${!names[@]}"; do
      [[ ${i} -ne ${j} ]] || continue
      docker exec "${names[i]}" ip route replace "${cidrs[j]}" via "${ips[j]}"
    done
    log "${names[i]}: pods ${cidrs[i]}"
  done
  # Every node runs pods, the control plane too, so that placement across
  # nodes is real with one worker node.
  kubectl taint nodes --all node-role.kubernetes.io/control-plane:NoSchedule- >/dev/null 2>&1 || true
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
  step "pod network" pod_network
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
  step "pod network" pod_network
  wait_ready
  step "load images: ${images[*]:-none}" load_images
  log "✔ kind cluster ${KIND_CLUSTER} is up ($((SECONDS - start)) s); kubeconfig context: ${context}"
}

# One kind-up or kind-down at a time (e2e, bench and a developer may race).
with_lock "kind-cluster-${KIND_CLUSTER}" up
echo "${context}"
