#!/usr/bin/env bash
# Brings up the whole shelljob stack on the kind cluster, as a user would
# install it, and prints the kubeconfig context:
#   1. make kind-up: the offline cluster, with the project's images built and
#      loaded (all cached);
#   2. the fake Telegram (cmd/faketg) as a Deployment and Service in
#      STACK_NAMESPACE, with a key pair kept in a Secret across runs;
#   3. helm upgrade --install of charts/shelljob into STACK_NAMESPACE, the
#      bot pointed at the fake through values (hack/stack-values.yaml);
#   4. a rollout of every Deployment and pool whose image was rebuilt (the
#      tag stays IMAGE_TAG, so helm alone would keep the old one running).
# env: HELM (the helm binary), KIND, LOCALBIN, KIND_WORKERS; STACK_NAMESPACE
# (default shelljob-system), STACK_VALUES (extra values files, space-separated).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

HELM="${HELM:-${ROOT_DIR}/bin/helm}"
STACK_NAMESPACE="${STACK_NAMESPACE:-shelljob-system}"
RELEASE=shelljob
FAKETG=shelljob-faketg
# The fake's admin: the user you are in the demo, and the e2e suite's admin.
FAKETG_ADMIN=1000001
[[ -x "${HELM}" ]] || die "no helm at ${HELM} (make e2e and make demo build it)"

context="$(make -s --no-print-directory -C "${ROOT_DIR}" kind-up | tail -n 1)"
[[ -n "${context}" ]] || die "make kind-up printed no kubeconfig context"
kubectl_bin="$("${HACK_DIR}/kube-binaries.sh" kubectl)/kubectl"
kubectl() { "${kubectl_bin}" --context "${context}" "$@"; }
helm() { "${HELM}" --kube-context "${context}" "$@"; }

# faketg_key: the fake's RSA key pair, made once and kept in a Secret, so the
# bot's saved session and the public key it trusts survive a redeploy.
faketg_key() {
  kubectl create namespace "${STACK_NAMESPACE}" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  if kubectl -n "${STACK_NAMESPACE}" get secret "${FAKETG}-key" >/dev/null 2>&1; then
    log "✔ ${FAKETG}-key (kept)"
    return 0
  fi
  local dir
  dir="$(mktemp -d)"
  (cd "${ROOT_DIR}" && go run ./cmd/faketg keygen -key "${dir}/key.pem" -pub "${dir}/pub.pem")
  kubectl -n "${STACK_NAMESPACE}" create secret generic "${FAKETG}-key" \
    --from-file=key.pem="${dir}/key.pem" --from-file=pub.pem="${dir}/pub.pem" >/dev/null
  rm -rf "${dir}"
}

faketg_deploy() {
  kubectl -n "${STACK_NAMESPACE}" apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Service
metadata:
  name: ${FAKETG}
  labels: {app.kubernetes.io/name: faketg, app.kubernetes.io/part-of: shelljob-e2e}
spec:
  selector: {app.kubernetes.io/name: faketg}
  ports:
  - {name: mtproto, port: 8443, targetPort: mtproto}
  - {name: control, port: 8080, targetPort: control}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: ${FAKETG}
  labels: {app.kubernetes.io/name: faketg, app.kubernetes.io/part-of: shelljob-e2e}
spec:
  replicas: 1
  strategy: {type: Recreate}
  selector:
    matchLabels: {app.kubernetes.io/name: faketg}
  template:
    metadata:
      labels: {app.kubernetes.io/name: faketg, app.kubernetes.io/part-of: shelljob-e2e}
    spec:
      automountServiceAccountToken: false
      securityContext:
        runAsNonRoot: true
        seccompProfile: {type: RuntimeDefault}
      containers:
      - name: faketg
        image: ${FAKETG_IMAGE}:${IMAGE_TAG}
        imagePullPolicy: IfNotPresent
        args:
        - -listen=0.0.0.0:8443
        - -advertise=\$(SERVICE_ADDR)
        - -control=0.0.0.0:8080
        - -chat=false
        - -key=/keys/key.pem
        - -key-out=/tmp/pub.pem
        - -files=/tmp/files
        - -admin=${FAKETG_ADMIN}
        env:
        - name: SERVICE_ADDR
          value: "${FAKETG}.${STACK_NAMESPACE}.svc:8443"
        # The fake keeps up to 256 MiB of the files the bot sent (a yes
        # flood's output.txt is 32 MiB), and its heap may grow to twice
        # what it keeps: past 512Mi it was OOM-killed mid-run, and lost
        # every chat. The GC holds it under GOMEMLIMIT.
        - name: GOMEMLIMIT
          value: 768MiB
        ports:
        - {name: mtproto, containerPort: 8443}
        - {name: control, containerPort: 8080}
        readinessProbe:
          httpGet: {path: /healthz, port: control}
          periodSeconds: 2
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          capabilities: {drop: [ALL]}
        resources:
          requests: {cpu: 20m, memory: 32Mi}
          limits: {memory: 1Gi}
        volumeMounts:
        - {name: key, mountPath: /keys, readOnly: true}
        - {name: tmp, mountPath: /tmp}
      volumes:
      - name: key
        secret: {secretName: ${FAKETG}-key}
      - name: tmp
        emptyDir: {}
YAML
}

# crds applies the chart's CRDs: helm installs crds/ once and never
# upgrades them, so a changed API would otherwise be pruned (README,
# "Upgrading").
crds() {
  kubectl apply --server-side --force-conflicts -f "${ROOT_DIR}/charts/shelljob/crds" >&2
}

# unstick: a helm killed mid-operation (a cancelled CI run, an e2e run cut
# short) leaves its release pending for good, and helm then refuses every
# upgrade as "another operation is in progress". Under the stack lock no
# other helm of this script runs, so a pending release here is a dead one:
# roll it back to the revision before, or uninstall a first install.
unstick() {
  local status revision
  read -r status revision < <(helm -n "${STACK_NAMESPACE}" status "${RELEASE}" -o json 2>/dev/null |
    jq -r '"\(.info.status) \(.version)"') || return 0
  case "${status}" in
  pending-upgrade | pending-rollback)
    if ((revision > 1)); then
      log "${RELEASE} is left ${status} at revision ${revision} by a helm that did not finish: rolling back"
      helm -n "${STACK_NAMESPACE}" rollback "${RELEASE}" --wait --timeout 5m >&2
      return
    fi
    ;&
  pending-install)
    log "${RELEASE} is left ${status} at revision ${revision} by a helm that did not finish: uninstalling"
    helm -n "${STACK_NAMESPACE}" uninstall "${RELEASE}" --wait --timeout 5m >&2
    ;;
  esac
}

chart() {
  local pub args=()
  unstick
  pub="$(kubectl -n "${STACK_NAMESPACE}" get secret "${FAKETG}-key" -o jsonpath='{.data.pub\.pem}' | base64 -d)"
  # upgrade --install takes the last of an unsorted history, so a release
  # with 10 revisions or more and an uninstalled one kept (the uninstall
  # e2e case) looks uninstalled to it: a deployed release gets a plain
  # upgrade.
  local verb=(upgrade --install)
  if [[ "$(helm -n "${STACK_NAMESPACE}" status "${RELEASE}" -o json 2>/dev/null | jq -r '.info.status')" == deployed ]]; then
    verb=(upgrade)
  fi
  args=("${verb[@]}" "${RELEASE}" "${ROOT_DIR}/charts/shelljob" -n "${STACK_NAMESPACE}"
    -f "${HACK_DIR}/stack-values.yaml"
    --set-string "bot.telegram.dcAddress=${FAKETG}.${STACK_NAMESPACE}.svc:8443"
    --set-string "bot.telegram.publicKey=${pub}"
    --set "bot.admins={${FAKETG_ADMIN}}"
    --set-string "images.operator.tag=${IMAGE_TAG}" --set-string "images.bot.tag=${IMAGE_TAG}"
    --set-string "images.worker.tag=${IMAGE_TAG}")
  local f
  for f in ${STACK_VALUES:-}; do args+=(-f "${f}"); done
  helm "${args[@]}" --wait --timeout 5m >&2
}

# image_id IMAGE: the ID of the image kind loaded.
image_id() { docker image inspect -f '{{.Id}}' "$1"; }

# roll: restarts each Deployment whose pods run an older build of its image,
# and restarts each pool whose workers do (spec.restartedAt, as .x does).
# A Deployment keeps the image ID it was last rolled to in an annotation:
# the image ID the kubelet reports may name the image as kind imported it
# (import-DATE@sha256:...), never equal to the build's, and pods still
# terminating run the old one.
roll() {
  local deploy image want running json
  for deploy in "${FAKETG}:${FAKETG_IMAGE}" "${RELEASE}-operator:${OPERATOR_IMAGE}" "${RELEASE}-bot:${BOT_IMAGE}"; do
    image="${deploy#*:}:${IMAGE_TAG}"
    deploy="${deploy%%:*}"
    json="$(kubectl -n "${STACK_NAMESPACE}" get deployment "${deploy}" -o json 2>/dev/null)" || continue
    want="$(image_id "${image}")"
    if [[ "$(jq -r '.metadata.annotations["shelljob.dev/rolled-image"] // empty' <<<"${json}")" != "${want}" ]]; then
      running="$(kubectl -n "${STACK_NAMESPACE}" get pods -l "$(jq -r '.spec.selector.matchLabels | to_entries | map("\(.key)=\(.value)") | join(",")' <<<"${json}")" -o json |
        jq -r '.items[] | select(.metadata.deletionTimestamp == null) | .status.containerStatuses[0].imageID // empty' | sort -u)"
      if [[ -n "${running}" ]] && grep -qv "${want#sha256:}" <<<"${running}"; then
        log "${deploy}: a new ${image}: rolling out"
        kubectl -n "${STACK_NAMESPACE}" rollout restart "deployment/${deploy}" >&2
      fi
      kubectl -n "${STACK_NAMESPACE}" annotate deployment "${deploy}" --overwrite "shelljob.dev/rolled-image=${want}" >/dev/null
    fi
    kubectl -n "${STACK_NAMESPACE}" rollout status "deployment/${deploy}" --timeout=180s >&2
  done
  want="$(image_id "${WORKER_IMAGE}:${IMAGE_TAG}")"
  local workers_ns pool
  workers_ns="$(helm -n "${STACK_NAMESPACE}" get values "${RELEASE}" --all -o json | jq -r '.workers.namespace // empty')"
  workers_ns="${workers_ns:-${STACK_NAMESPACE}-workers}"
  for pool in $(stack_pools); do
    running="$(kubectl -n "${workers_ns}" get pods -l "shell.shelljob.dev/pool=${pool#*/}" \
      -o jsonpath='{range .items[*]}{.status.containerStatuses[0].imageID}{"\n"}{end}' | sort -u)"
    if [[ -n "${running}" ]] && grep -qv "${want#sha256:}" <<<"${running}"; then
      log "${pool}: a new ${WORKER_IMAGE}:${IMAGE_TAG}: restarting the pool"
      kubectl -n "${STACK_NAMESPACE}" patch "${pool}" --type merge \
        -p "{\"spec\":{\"restartedAt\":\"$(date -u +%Y-%m-%dT%H:%M:%SZ)\"}}" >/dev/null
    fi
  done
}

# stack_pools: the pools to roll and wait for. Those of an earlier e2e run
# (labelled e2e.shelljob.dev/pool) are not: hack/e2e.sh deletes them next.
stack_pools() {
  kubectl -n "${STACK_NAMESPACE}" get shellpools -l '!e2e.shelljob.dev/pool' -o name
}

pools_ready() {
  local pool
  for pool in $(stack_pools); do
    kubectl -n "${STACK_NAMESPACE}" wait --for=condition=Available "${pool}" --timeout=300s >&2
  done
}

# quota_counted: the chart's ShellJob quota counted by the quota controller,
# which on a new cluster starts watching the new kind at its next discovery
# pass; until then a create is refused ("status unknown for quota"), and
# the bot and the CLI wait for it (shelljob.CreateQuotaCounted).
quota_counted() {
  local quota=shelljob-shelljobs used=""
  kubectl -n "${STACK_NAMESPACE}" get resourcequota "${quota}" >/dev/null 2>&1 || return 0
  for _ in $(seq 1 150); do
    used="$(kubectl -n "${STACK_NAMESPACE}" get resourcequota "${quota}" -o jsonpath='{.status.used.count/shelljobs\.shell\.shelljob\.dev}' 2>/dev/null || true)"
    [[ -z "${used}" ]] || return 0
    sleep 2
  done
  die "the ResourceQuota ${quota} was not counted within 300 s"
}

up() {
  step "fake Telegram key" faketg_key
  step "fake Telegram (${FAKETG})" faketg_deploy
  step "CRDs" crds
  step "helm upgrade --install ${RELEASE}" chart
  step "roll out rebuilt images" roll
  step "pools ready" pools_ready
  step "ShellJob quota counted" quota_counted
}

with_lock "stack-${KIND_CLUSTER}" up
echo "${context}"
