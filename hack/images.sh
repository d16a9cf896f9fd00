#!/usr/bin/env bash
# Builds the project's images without pulling anything, and prints the names of
# those it has (one a line):
#   - OPERATOR_IMAGE (cmd/manager), BOT_IMAGE (cmd/bot) and FAKETG_IMAGE
#     (cmd/faketg, the fake Telegram of the e2e suite and the demo): one static
#     binary in an otherwise empty image, user 65532;
#   - WORKER_IMAGE: a Debian minbase (debootstrap) with zsh, coreutils and procps,
#     user shell (uid 1000, home /home/shell), and the agent (cmd/agent) at
#     /usr/local/bin/shelljob-agent as its entrypoint, and its spool dir
#     /var/lib/shelljob owned by that user (a pod may mount an emptyDir there).
#     The image runs as shell; worker pods run the agent as root instead, which
#     runs the Stateful shell as shell, in its home, and each Fork job as a user
#     of its own (agent/isolate.go);
# An image is built only when its cmd/ directory holds a main package that
# compiles; it is rebuilt only when the binary (or the worker base) changed,
# as recorded in a label. The worker base rootfs is cached by recipe hash.
# All are tagged IMAGE_TAG.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

WORKER_PACKAGES=(zsh procps ca-certificates)
WORKER_UID=1000
AGENT_PATH=/usr/local/bin/shelljob-agent
SPOOL_DIR=/var/lib/shelljob   # the agent's default spool (internal/agentapi), writable by the user
LABEL=dev.shelljob.inputs
out="${SHELLJOB_CACHE}/images"

# go_binary NAME PKG: builds ./cmd/PKG into the cache; fails when it is no main package or does not compile.
# (It checks every command itself: it is called where errexit does not apply.)
go_binary() {
  local name="$1" pkg="./cmd/$2" start=$SECONDS
  [[ "$(cd "${ROOT_DIR}" && go list -f '{{.Name}}' "${pkg}" 2>/dev/null)" == main ]] || {
    log "skip ${name}: ${pkg} holds no main package yet"
    return 1
  }
  mkdir -p "${out}/bin"
  if ! (cd "${ROOT_DIR}" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "${out}/bin/${name}" "${pkg}") 2>"${out}/${name}.err"; then
    log "skip ${name}: ${pkg} does not compile ($(head -3 "${out}/${name}.err" | tr '\n' ' '))"
    return 1
  fi
  log "✔ go build ${pkg} ($((SECONDS - start)) s)"
}

# up_to_date IMAGE INPUTS: whether IMAGE exists with label INPUTS.
up_to_date() {
  [[ "$(docker image inspect -f "{{index .Config.Labels \"${LABEL}\"}}" "$1" 2>/dev/null)" == "$2" ]]
}

# drop_replaced ID: removes an image that a rebuild left without a tag.
drop_replaced() {
  [[ -n "$1" ]] || return 0
  [[ "$(docker image inspect -f '{{len .RepoTags}}' "$1" 2>/dev/null)" == 0 ]] || return 0
  docker rmi "$1" >/dev/null 2>&1 || true
}

# static_image IMAGE NAME PKG: an image of the static binary /NAME alone.
static_image() {
  local image="$1:${IMAGE_TAG}" name="$2" pkg="$3" inputs dir old
  go_binary "${name}" "${pkg}" || return 0
  inputs="$(sha256sum "${out}/bin/${name}" | cut -c1-16)"
  if up_to_date "${image}" "${inputs}"; then
    log "✔ ${image} (binary unchanged)"
  else
    old="$(docker image inspect -f '{{.Id}}' "${image}" 2>/dev/null || true)"
    dir="$(mktemp -d)"
    install -D -m 0755 "${out}/bin/${name}" "${dir}/${name}"
    install -d -m 1777 "${dir}/tmp"
    [[ ! -f /etc/ssl/certs/ca-certificates.crt ]] ||
      install -D -m 0644 /etc/ssl/certs/ca-certificates.crt "${dir}/etc/ssl/certs/ca-certificates.crt"
    tar -C "${dir}" --numeric-owner --owner=0 --group=0 -c . |
      docker import --change "ENTRYPOINT [\"/${name}\"]" --change 'USER 65532:65532' \
        --change "LABEL ${LABEL}=${inputs}" - "${image}" >/dev/null
    rm -rf "${dir}"
    drop_replaced "${old}"
    log "✔ ${image} built"
  fi
  echo "${image}"
}

debootstrap_worker() {
  apt_install debootstrap
  local rootfs="${SHELLJOB_CACHE}/rootfs/worker-${worker_key}" mirror
  mirror="$(apt_mirror)"
  rm -rf "${rootfs}"
  mkdir -p "${rootfs}" "${SHELLJOB_CACHE}/logs"
  log "debootstrap ${DEBIAN_SUITE} from ${mirror} (log: ${SHELLJOB_CACHE}/logs/debootstrap-worker.log)"
  debootstrap --variant=minbase --include="$(IFS=,; echo "${WORKER_PACKAGES[*]}")" \
    "${DEBIAN_SUITE}" "${rootfs}" "${mirror}" >"${SHELLJOB_CACHE}/logs/debootstrap-worker.log" 2>&1 ||
    { tail -20 "${SHELLJOB_CACHE}/logs/debootstrap-worker.log" >&2; die "debootstrap failed"; }
  chroot "${rootfs}" useradd --create-home --home-dir /home/shell --uid "${WORKER_UID}" --user-group --shell /usr/bin/zsh shell
  touch "${rootfs}/home/shell/.zshrc"
  install -d "${rootfs}${SPOOL_DIR}"
  chown "${WORKER_UID}:${WORKER_UID}" "${rootfs}/home/shell/.zshrc" "${rootfs}${SPOOL_DIR}"
  rm -rf "${rootfs}"/var/cache/apt/archives/*.deb "${rootfs}"/var/lib/apt/lists/* "${rootfs}"/var/log/*.log
  tar -C "${rootfs}" --numeric-owner -c . |
    docker import --change "USER ${WORKER_UID}:${WORKER_UID}" --change 'WORKDIR /home/shell' \
      --change 'ENV HOME=/home/shell' --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'ENV LANG=C.UTF-8' --change 'CMD ["/usr/bin/zsh"]' - "${worker_base}" >/dev/null
  rm -rf "${rootfs}"
}

worker_base_image() {
  if image_exists "${worker_base}"; then
    log "✔ ${worker_base} (cached)"
  else
    step "build ${worker_base}" debootstrap_worker
    prune_other_tags "${worker_base%%:*}" "${worker_base##*:}"
  fi
}

worker_image() {
  local image="${WORKER_IMAGE}:${IMAGE_TAG}" inputs cid old
  with_lock "worker-base-${worker_key}" worker_base_image
  go_binary shelljob-agent agent || return 0
  inputs="$(sha256sum "${out}/bin/shelljob-agent" | cut -c1-16)-$(docker image inspect -f '{{.Id}}' "${worker_base}" | cut -c8-23)"
  if up_to_date "${image}" "${inputs}"; then
    log "✔ ${image} (agent and base unchanged)"
  else
    old="$(docker image inspect -f '{{.Id}}' "${image}" 2>/dev/null || true)"
    cid="$(docker create "${worker_base}")"
    docker cp "${out}/bin/shelljob-agent" "${cid}:${AGENT_PATH}"
    docker commit --change "ENTRYPOINT [\"${AGENT_PATH}\"]" --change 'CMD []' \
      --change "LABEL ${LABEL}=${inputs}" "${cid}" "${image}" >/dev/null
    docker rm "${cid}" >/dev/null
    drop_replaced "${old}"
    log "✔ ${image} built"
  fi
  echo "${image}"
}

# The worker base is keyed by its own recipe only, so that edits elsewhere in
# this file don't redo the debootstrap.
worker_key="${DEBIAN_SUITE}-$(recipe_hash <(declare -f debootstrap_worker; echo "${WORKER_PACKAGES[*]} ${WORKER_UID} ${SPOOL_DIR}"))"
worker_base="${WORKER_IMAGE}-base:${worker_key}"

# --worker-base: build (if needed) and print the worker base image only.
if [[ "${1:-}" == --worker-base ]]; then
  "${HACK_DIR}/docker-engine.sh"
  with_lock "worker-base-${worker_key}" worker_base_image
  echo "${worker_base}"
  exit 0
fi

build_all() {
  static_image "${OPERATOR_IMAGE}" manager manager
  static_image "${BOT_IMAGE}" bot bot
  static_image "${FAKETG_IMAGE}" faketg faketg
  worker_image
}

"${HACK_DIR}/docker-engine.sh"
with_lock images build_all
