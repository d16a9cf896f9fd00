#!/usr/bin/env bash
# Makes sure a Docker engine runs and can run privileged containers (kind nodes
# are privileged).
#
# - An engine that answers `docker info` is used as it is.
# - Otherwise Debian's docker.io is installed if needed, and dockerd is started
#   in the background, logging to ${SHELLJOB_CACHE}/logs/dockerd.log.
# - If a privileged container then fails because the capability bounding set
#   lacks a capability, hack/runc-wrapper.sh is installed as the engine's
#   default runtime. Nothing is changed where privileged containers work.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RUNTIME_NAME=shelljob-runc
RUNTIME_PATH=/usr/local/libexec/shelljob/shelljob-runc
DAEMON_JSON=/etc/docker/daemon.json
PROBE_IMAGE=shelljob/probe:1
LOG_FILE="${SHELLJOB_CACHE}/logs/dockerd.log"

engine_up() { docker info >/dev/null 2>&1; }

wait_engine() {
  for _ in $(seq 1 120); do
    engine_up && return 0
    sleep 0.5
  done
  return 1
}

start_engine() {
  if ! command -v dockerd >/dev/null; then
    apt_install docker.io
    # Debian's package may have started the engine through its init script.
    sleep 1
    if engine_up; then return 0; fi
  fi
  command -v docker >/dev/null || apt_install docker.io
  mkdir -p "$(dirname "${LOG_FILE}")"
  log "starting dockerd (log: ${LOG_FILE})"
  # A pid file left by an engine that did not stop cleanly (a reboot) blocks the start.
  if [[ -f /var/run/docker.pid ]] && ! kill -0 "$(cat /var/run/docker.pid)" 2>/dev/null; then
    rm -f /var/run/docker.pid
  fi
  # (fd 9 is with_lock's lock: the engine must not hold it.)
  setsid nohup dockerd >>"${LOG_FILE}" 2>&1 </dev/null 9>&- &
  wait_engine || { tail -20 "${LOG_FILE}" >&2; die "dockerd did not come up"; }
}

# probe_image: a tiny local image (the host's /bin/true and its libraries),
# since no image can be pulled.
probe_image() {
  image_exists "${PROBE_IMAGE}" && return 0
  local files
  files="$(ldd /bin/true | grep -o '/[^ ]*' | sort -u)"
  # shellcheck disable=SC2086
  tar -C / -chf - bin/true ${files//$'\n'/ } 2>/dev/null |
    docker import --change 'ENTRYPOINT ["/bin/true"]' - "${PROBE_IMAGE}" >/dev/null
}

privileged_works() {
  docker run --rm --privileged --net=none "${PROBE_IMAGE}" >/dev/null 2>"${SHELLJOB_CACHE}/logs/probe.err"
}

bounding_set_complete() {
  local bnd last
  bnd="$(awk '/^CapBnd:/ {print $2}' /proc/self/status)"
  last="$(cat /proc/sys/kernel/cap_last_cap)"
  (( (0x${bnd} + 1) == (1 << (last + 1)) ))
}

install_wrapper() {
  apt_install jq
  install -D -m 0755 "${HACK_DIR}/runc-wrapper.sh" "${RUNTIME_PATH}"
  mkdir -p "$(dirname "${DAEMON_JSON}")"
  local cur='{}'
  [[ -s "${DAEMON_JSON}" ]] && cur="$(cat "${DAEMON_JSON}")"
  jq --arg n "${RUNTIME_NAME}" --arg p "${RUNTIME_PATH}" \
    '.runtimes[$n] = {path: $p} | ."default-runtime" = $n' <<<"${cur}" >"${DAEMON_JSON}.tmp"
  mv "${DAEMON_JSON}.tmp" "${DAEMON_JSON}"
  # dockerd reloads runtimes and default-runtime on SIGHUP.
  local pid
  pid="$(cat /var/run/docker.pid 2>/dev/null || pidof dockerd || true)"
  [[ -n "${pid}" ]] || die "cannot find dockerd's pid to reload ${DAEMON_JSON}"
  kill -HUP "${pid}"
  sleep 1
  wait_engine
}

ensure() {
  engine_up || step "start a Docker engine" start_engine
  mkdir -p "${SHELLJOB_CACHE}/logs"
  # Keep an installed wrapper in step with the repository's.
  if [[ -f "${RUNTIME_PATH}" ]] && ! cmp -s "${HACK_DIR}/runc-wrapper.sh" "${RUNTIME_PATH}"; then
    install -m 0755 "${HACK_DIR}/runc-wrapper.sh" "${RUNTIME_PATH}"
  fi
  probe_image
  if privileged_works; then
    log "✔ Docker engine $(docker version -f '{{.Server.Version}}'), runtime $(docker info -f '{{.DefaultRuntime}}'): privileged containers work"
    return 0
  fi
  if bounding_set_complete || ! grep -q 'caps\|capab\|operation not permitted' "${SHELLJOB_CACHE}/logs/probe.err"; then
    cat "${SHELLJOB_CACHE}/logs/probe.err" >&2
    die "privileged containers fail, and not for a missing capability"
  fi
  step "install the ${RUNTIME_NAME} runtime wrapper (capability bounding set: $(awk '/^CapBnd:/ {print $2}' /proc/self/status))" install_wrapper
  privileged_works || { cat "${SHELLJOB_CACHE}/logs/probe.err" >&2; die "privileged containers still fail"; }
  log "✔ privileged containers work through ${RUNTIME_NAME}"
}

with_lock docker-engine ensure
