#!/usr/bin/env bash
# Builds a kind node image for KUBE_VERSION without pulling anything, and
# prints its tag. What `kind build node-image` would do, but from local parts
# (kind's build always fetches images from registries):
#   - the base from hack/kind-base-image.sh (Debian, containerd, runc, CNI,
#     runtime wrapper);
#   - kubeadm, kubelet and kubectl from hack/kube-binaries.sh, crictl from
#     hack/crictl.sh;
#   - preloaded into the node's containerd, with exactly the names and tags that
#     `kubeadm config images list` asks for: kube-apiserver,
#     kube-controller-manager, kube-scheduler (the binary alone), kube-proxy (the
#     base plus the binary: it needs nft), etcd (hack/etcd.sh), coredns
#     (hack/coredns.sh) and pause (gcc -static of the kubernetes module's
#     build/pause/linux/pause.c).
# The tag is a hash of all inputs; nothing is done when it exists.
# usage: hack/kind-node-image.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

"${HACK_DIR}/docker-engine.sh"

# The inputs: the recipes of every part, and their versions (each build script
# keys its output by its own recipe and version, so this names them all). The
# tag is known before anything is built.
base="$("${HACK_DIR}/kind-base-image.sh" --tag)"
key="$(recipe_hash "${BASH_SOURCE[0]}" "${HACK_DIR}"/{kube-binaries,etcd,coredns,crictl}.sh \
  <(echo "${base} ${KUBE_VERSION} ${ETCD_VERSION} ${COREDNS_VERSION} ${CRICTL_VERSION}"))"
tag="${KIND_NODE_REPO}:${KUBE_VERSION}-${key}"

# kubeadm's image list, e.g. registry.k8s.io/coredns/coredns:v1.14.6.
kubeadm_image() {
  "${kube}/kubeadm" config images list --kubernetes-version "${KUBE_VERSION}" 2>/dev/null | grep -E "/$1:" ||
    die "kubeadm ${KUBE_VERSION} lists no $1 image"
}

pause_binary() {
  local version="$1" src out
  src="$(gomod_dir "k8s.io/kubernetes@${KUBE_VERSION}")/build/pause/linux/pause.c"
  out="${SHELLJOB_CACHE}/pause/${version}-$(recipe_hash "${src}" "${BASH_SOURCE[0]}" | cut -c1-8)/pause"
  if [[ ! -x "${out}" ]]; then
    apt_install gcc libc6-dev
    mkdir -p "$(dirname "${out}")"
    gcc -Os -Wall -Werror -static -DVERSION="v${version}" -o "${out}.tmp" "${src}"
    strip "${out}.tmp"
    mv "${out}.tmp" "${out}"
  fi
  echo "${out}"
}

# import_binary IMAGE DEST FILE [CHANGE...]: an image holding one static binary.
import_binary() {
  local image="$1" dest="$2" file="$3"; shift 3
  local dir changes=()
  dir="$(mktemp -d)"
  install -D -m 0755 "${file}" "${dir}${dest}"
  local c
  for c in "$@"; do changes+=(--change "${c}"); done
  tar -C "${dir}" --numeric-owner --owner=0 --group=0 -c . | docker import "${changes[@]}" - "${image}" >/dev/null
  rm -rf "${dir}"
}

component_images() {
  local path='ENV PATH=/usr/local/bin:/usr/bin:/bin' c img
  for c in kube-apiserver kube-controller-manager kube-scheduler; do
    img="$(kubeadm_image "${c}")"
    import_binary "${img}" "/usr/local/bin/${c}" "${kube}/${c}" "${path}"
    images+=("${img}")
  done

  img="$(kubeadm_image etcd)"
  [[ "${img##*:}" == "${ETCD_VERSION#v}"* ]] || die "kubeadm wants ${img}, hack/etcd.sh builds ${ETCD_VERSION}"
  import_binary "${img}" /usr/local/bin/etcd "${etcd}/etcd" "${path}"
  images+=("${img}")

  img="$(kubeadm_image coredns)"
  [[ "${img##*:}" == "${COREDNS_VERSION}" ]] || die "kubeadm wants ${img}, hack/coredns.sh builds ${COREDNS_VERSION}"
  import_binary "${img}" /coredns "${coredns}/coredns" 'ENTRYPOINT ["/coredns"]'
  images+=("${img}")

  img="$(kubeadm_image pause)"
  pause_image="${img}"
  import_binary "${img}" /pause "$(pause_binary "${img##*:}")" 'ENTRYPOINT ["/pause"]'
  images+=("${img}")

  # kube-proxy needs nft (and iptables for its clean-up): the base image plus the binary.
  img="$(kubeadm_image kube-proxy)"
  local cid
  cid="$(docker create --entrypoint /usr/local/bin/kube-proxy "${base}")"
  docker cp "${kube}/kube-proxy" "${cid}:/usr/local/bin/kube-proxy"
  docker commit --change 'ENTRYPOINT ["/usr/local/bin/kube-proxy"]' "${cid}" "${img}" >/dev/null
  docker rm "${cid}" >/dev/null
  images+=("${img}")
}

node_exec() { docker exec "${node}" "$@"; }
# node_write PATH: writes stdin to PATH in the node.
node_write() { docker exec -i "${node}" sh -c "cat > '$1'"; }

assemble() {
  node="shelljob-node-build-$$"
  trap 'docker rm -f "${node}" >/dev/null 2>&1 || true' EXIT
  docker run -d --name "${node}" --privileged --entrypoint=sleep "${base}" infinity >/dev/null

  local b
  for b in kubeadm kubelet kubectl; do docker cp "${kube}/${b}" "${node}:/usr/bin/${b}"; done
  docker cp "${crictl}/crictl" "${node}:/usr/local/bin/crictl"
  echo "${KUBE_VERSION}" | node_write /kind/version
  # kind applies these two manifests. Pod networking is a ptp config per node
  # that kind-up.sh writes, and there is no provisioner image: keep both harmless.
  node_write /kind/manifests/default-cni.yaml <<'YAML'
apiVersion: v1
kind: ConfigMap
metadata:
  name: shelljob-cni
  namespace: kube-system
data:
  note: "Pod networking is a ptp CNI config per node for its podCIDR, with routes to the other nodes' pods (hack/kind-up.sh)."
YAML
  node_write /kind/manifests/default-storage.yaml <<'YAML'
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
YAML
  node_exec sed -i "s|sandbox_image = .*|sandbox_image = \"${pause_image}\"|" /etc/containerd/config.toml

  node_exec sh -c 'containerd >/var/log/containerd-build.log 2>&1 &'
  for _ in $(seq 1 60); do node_exec ctr version >/dev/null 2>&1 && break; sleep 0.5; done
  local img
  for img in "${images[@]}"; do
    docker save "${img}" | docker exec -i "${node}" ctr -n k8s.io images import --all-platforms --no-unpack --digests - >/dev/null
  done
  log "images in the node: $(node_exec ctr -n k8s.io images ls -q | grep -v '^sha256:' | tr '\n' ' ')"
  node_exec sh -c 'kill $(pidof containerd); while pidof containerd >/dev/null; do sleep 0.2; done'
  local f
  for f in /kind/version /kind/manifests/default-cni.yaml /kind/manifests/default-storage.yaml; do
    node_exec test -s "${f}" || die "${f} is empty in the node"
  done
  docker commit --change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' "${node}" "${tag}" >/dev/null
  docker rm -f "${node}" >/dev/null
  trap - EXIT
  # The node holds the component images now: don't leave registry names in the engine.
  docker rmi "${images[@]}" >/dev/null
}

build() {
  kube="$("${HACK_DIR}/kube-binaries.sh")"
  etcd="$("${HACK_DIR}/etcd.sh")"
  coredns="$("${HACK_DIR}/coredns.sh")"
  crictl="$("${HACK_DIR}/crictl.sh")"
  base="$("${HACK_DIR}/kind-base-image.sh")"
  images=()
  step "kind node: component images (kubeadm's names)" component_images
  step "kind node: assemble and preload ${tag}" assemble
}

ensure() {
  if image_exists "${tag}"; then
    log "✔ ${tag} (cached)"
  else
    # A build container left by an interrupted run.
    docker ps -aq --filter name='^shelljob-node-build-' | xargs -r docker rm -f >/dev/null
    step "build ${tag}" build
    prune_other_tags "${tag%%:*}" "${tag##*:}"
  fi
}

with_lock "kind-node" ensure
echo "${tag}"
