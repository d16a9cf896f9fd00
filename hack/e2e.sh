#!/usr/bin/env bash
# Runs the end-to-end tests (test/e2e, build tag e2e) on the kind cluster:
#   1. make kind-up: the offline cluster, with the project's images built
#      and loaded (all cached);
#   2. make deploy: the operator, restarted so it runs the image just loaded
#      (the tag stays 0.1.0), and the e2e pools of an earlier run removed so
#      their workers come back on the loaded worker image;
#   3. go test -tags e2e ./test/e2e.
# With --setup it stops after step 2 and prints the kubeconfig context
# (hack/bench.sh, section cluster, uses it).
# env: E2E_RUN (a -run pattern), E2E_TIMEOUT (default 40m), GOFLAGS.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

NAMESPACE=shelljob-system
start=$SECONDS

context="$(make -s --no-print-directory -C "${ROOT_DIR}" kind-up | tail -n 1)"
[[ -n "${context}" ]] || die "make kind-up printed no kubeconfig context"
kubectl_bin="$("${HACK_DIR}/kube-binaries.sh" kubectl)/kubectl"
kubectl() { "${kubectl_bin}" --context "${context}" "$@"; }

redeploy() {
  make -s --no-print-directory -C "${ROOT_DIR}" deploy DEPLOY_CONTEXT="${context}" >&2
  kubectl -n "${NAMESPACE}" rollout restart deployment/shelljob-operator >&2
  kubectl -n "${NAMESPACE}" rollout status deployment/shelljob-operator --timeout=180s >&2
}

clean() {
  kubectl -n "${NAMESPACE}" delete shelljobs -l e2e.shelljob.dev/test --wait --timeout=120s >&2
  kubectl -n "${NAMESPACE}" delete shellpools e2e e2e-restart --ignore-not-found --wait --timeout=120s >&2
  kubectl -n "${NAMESPACE}" wait --for=delete pod -l 'shell.shelljob.dev/pool in (e2e, e2e-restart)' --timeout=120s >&2 || true
}

step "deploy the operator to ${context}" redeploy
step "remove what an earlier run left" clean
if [[ "${1:-}" == --setup ]]; then
  echo "${context}"
  exit 0
fi

log "▶ go test -tags e2e ./test/e2e"
cd "${ROOT_DIR}"
E2E_CONTEXT="${context}" KUBECTL="${kubectl_bin}" \
  go test -tags e2e -count=1 -v -timeout "${E2E_TIMEOUT:-40m}" ${E2E_RUN:+-run "${E2E_RUN}"} ./test/e2e/
log "✔ e2e passed ($((SECONDS - start)) s)"
