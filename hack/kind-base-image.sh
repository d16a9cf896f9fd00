#!/usr/bin/env bash
# Builds the base of the kind node image without pulling anything, and prints
# its tag: a Debian minbase rootfs from debootstrap (mirror taken from this
# machine's apt sources) with systemd and the CNI plugins; containerd 2
# from hack/containerd.sh and runc from hack/runc.sh (stock, the versions
# kind's own node image carries: Debian's runc 1.1 cannot run pods with
# hostUsers: false);
# plus what kind's own images/base/Dockerfile adds: kind's files from
# the kind module, the systemd clean-up, cri-base.json, the enabled units. On top:
#   - the runtime wrapper (hack/runc-wrapper.sh) as containerd's runc binary,
#     so privileged pods run in a node whose bounding set lacks capabilities;
#   - the kubelet flag --fail-cgroupv1=false (cgroup v1 hosts);
#   - the worker pods' seccomp profile (hack/seccomp-profile.sh) at
#     /var/lib/kubelet/seccomp/shelljob/worker.json, for their Localhost
#     seccompProfile shelljob/worker.json;
#   - no CNI config: kindnetd's image can't be had here, so hack/kind-up.sh
#     gives each node a ptp config for its own podCIDR and routes to the
#     other nodes' pods.
# The tag is a hash of this recipe; nothing is done when it exists.
# usage: hack/kind-base-image.sh [--tag]
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PACKAGES=(
  systemd systemd-sysv dbus
  conntrack iptables nftables iproute2 ethtool util-linux mount kmod
  libseccomp2 pigz fuse-overlayfs e2fsprogs
  bash ca-certificates curl jq procps
  containernetworking-plugins
)
WRAPPER=/usr/local/sbin/shelljob-runc

# (hack/containerd.sh's, hack/runc.sh's and hack/seccomp-profile.sh's
# outputs are keyed by the same versions and recipes.)
key="${DEBIAN_SUITE}-${KIND_VERSION}-$(recipe_hash "${BASH_SOURCE[0]}" "${HACK_DIR}"/{runc-wrapper,containerd,runc,seccomp-profile}.sh \
  <(echo "${CONTAINERD_VERSION} ${RUNC_VERSION}"))"
tag="shelljob/kind-base:${key}"

debootstrap_rootfs() {
  local mirror
  mirror="$(apt_mirror)"
  log "debootstrap ${DEBIAN_SUITE} from ${mirror} (log: ${SHELLJOB_CACHE}/logs/debootstrap-kind-base.log)"
  debootstrap --variant=minbase --include="$(IFS=,; echo "${PACKAGES[*]}")" \
    "${DEBIAN_SUITE}" "${rootfs}" "${mirror}" >"${SHELLJOB_CACHE}/logs/debootstrap-kind-base.log" 2>&1 ||
    { tail -20 "${SHELLJOB_CACHE}/logs/debootstrap-kind-base.log" >&2; die "debootstrap failed"; }
}

kind_files() {
  local files r="${rootfs}"
  files="$(gomod_dir "sigs.k8s.io/kind@${KIND_VERSION}")/images/base/files"
  install -d -m 0755 "${r}/kind" "${r}/kind/bin" "${r}/kind/manifests" "${r}/LICENSES"
  install -m 0755 "${files}"/usr/local/bin/* "${r}/usr/local/bin/"
  install -m 0755 "${files}"/kind/bin/* "${r}/kind/bin/"
  install -m 0644 "${files}"/kind/README.txt "${r}/kind/"
  install -m 0644 "${files}"/LICENSES/* "${r}/LICENSES/"
  install -m 0644 "${files}"/etc/crictl.yaml "${r}/etc/"
  install -D -m 0644 -t "${r}/etc/containerd" "${files}"/etc/containerd/*
  install -D -m 0644 -t "${r}/etc/default" "${files}"/etc/default/*
  install -D -m 0644 -t "${r}/etc/sysctl.d" "${files}"/etc/sysctl.d/*
  install -D -m 0644 -t "${r}/etc/systemd/system" "${files}"/etc/systemd/system/*.service "${files}"/etc/systemd/system/*.slice
  install -D -m 0644 -t "${r}/etc/systemd/system/kubelet.service.d" "${files}"/etc/systemd/system/kubelet.service.d/*

  # kind's Dockerfile: systemd clean-up, init, services.
  find "${r}/lib/systemd/system/sysinit.target.wants/" -name systemd-tmpfiles-setup.service -delete
  rm -f "${r}"/lib/systemd/system/multi-user.target.wants/* "${r}"/etc/systemd/system/*.wants/* \
    "${r}"/lib/systemd/system/local-fs.target.wants/* "${r}"/lib/systemd/system/sockets.target.wants/*udev* \
    "${r}"/lib/systemd/system/sockets.target.wants/*initctl* "${r}"/lib/systemd/system/basic.target.wants/*
  echo "ReadKMsg=no" >> "${r}/etc/systemd/journald.conf"
  ln -sf /usr/lib/systemd/systemd "${r}/sbin/init"
  systemctl --root="${r}" enable kubelet.service containerd.service undo-mount-hacks.service >/dev/null 2>&1
  systemctl --root="${r}" mask systemd-binfmt.service >/dev/null 2>&1
  install -d "${r}/etc/kubernetes/manifests"

  # containerd where kind's unit expects it; Debian's CNI plugins where kind's config expects them.
  install -m 0755 "${containerd}"/containerd "${containerd}"/containerd-shim-runc-v2 "${containerd}"/ctr "${r}/usr/local/bin/"
  install -D -m 0755 "${runc}/runc" "${r}/usr/local/sbin/runc"
  install -d "${r}/opt/cni/bin"
  local p
  for p in "${r}"/usr/lib/cni/*; do ln -sf "/usr/lib/cni/$(basename "${p}")" "${r}/opt/cni/bin/"; done
  chroot "${r}" /usr/local/bin/ctr oci spec |
    jq '.hooks.createContainer[.hooks.createContainer | length] |= . + {"path": "/kind/bin/mount-product-files.sh"}' |
    jq 'del(.process.rlimits)' > "${r}/etc/containerd/cri-base.json"
}

shelljob_changes() {
  local r="${rootfs}"
  install -m 0755 "${HACK_DIR}/runc-wrapper.sh" "${r}${WRAPPER}"
  sed -i "/SystemdCgroup = true/a\\    BinaryName = \"${WRAPPER}\"" "${r}/etc/containerd/config.toml"
  grep -q "BinaryName = \"${WRAPPER}\"" "${r}/etc/containerd/config.toml" || die "could not set BinaryName"
  sed -i 's/^KUBELET_EXTRA_ARGS=.*/& --fail-cgroupv1=false/' "${r}/etc/default/kubelet"
  install -D -m 0644 "${seccomp}" "${r}/var/lib/kubelet/seccomp/shelljob/worker.json"
  # No CNI config: kind-up.sh writes each node's own, from the podCIDR the
  # controller manager gives it, so the node is NotReady until then.
  install -d "${r}/etc/cni/net.d"
  rm -rf "${r}"/var/cache/apt/archives/*.deb "${r}"/var/lib/apt/lists/* "${r}"/var/log/*.log
}

import_rootfs() {
  tar -C "${rootfs}" --numeric-owner -c . |
    docker import --change 'ENV container=docker' \
      --change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' - "${tag}" >/dev/null
}

build() {
  apt_install debootstrap jq
  containerd="$("${HACK_DIR}/containerd.sh")"
  runc="$("${HACK_DIR}/runc.sh")"
  seccomp="$("${HACK_DIR}/seccomp-profile.sh")"
  rootfs="${SHELLJOB_CACHE}/rootfs/kind-base-${key}"
  rm -rf "${rootfs}"
  mkdir -p "${rootfs}" "${SHELLJOB_CACHE}/logs"
  step "kind base: debootstrap" debootstrap_rootfs
  step "kind base: kind ${KIND_VERSION} files and units" kind_files
  step "kind base: runtime wrapper, kubelet flag" shelljob_changes
  step "kind base: docker import ${tag}" import_rootfs
  rm -rf "${rootfs}"
}

ensure() {
  if image_exists "${tag}"; then
    log "✔ ${tag} (cached)"
  else
    step "build ${tag}" build
    prune_other_tags "${tag%%:*}" "${tag##*:}"
  fi
}

# --tag: print the tag only, building nothing.
if [[ "${1:-}" == --tag ]]; then echo "${tag}"; exit 0; fi

"${HACK_DIR}/docker-engine.sh"
with_lock "kind-base-${key}" ensure
echo "${tag}"
