#!/usr/bin/env bash
# Runs the end-to-end tests (test/e2e, build tag e2e) on the kind cluster:
#   1. hack/stack.sh: the offline cluster (one control plane, KIND_WORKERS
#      worker nodes), the fake Telegram, and the chart installed as a user
#      would, the bot pointed at the fake;
#   2. the e2e pools of an earlier run removed, so their workers come back on
#      the loaded worker image;
#   3. go test -tags e2e ./test/e2e, which drives the operator through the
#      API and the whole stack through the fake Telegram.
# With --setup it stops after step 2 and prints the kubeconfig context
# (hack/bench.sh uses it).
# env: HELM, E2E_RUN (a -run pattern), E2E_TIMEOUT (default 40m), GOFLAGS.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

NAMESPACE="${STACK_NAMESPACE:-shelljob-system}"
start=$SECONDS

context="$("${HACK_DIR}/stack.sh" | tail -n 1)"
[[ -n "${context}" ]] || die "hack/stack.sh printed no kubeconfig context"
kubectl_bin="$("${HACK_DIR}/kube-binaries.sh" kubectl)/kubectl"
kubectl() { "${kubectl_bin}" --context "${context}" "$@"; }

# A cut benchmark can leave thousands of jobs: one deletecollection call
# removes them all (kubectl delete would send one request per job under its
# client-side rate limit), repeated while the API server's cache of them is
# still (re)initializing (429) after a restart of the cluster, then the wait
# lets the operator's finalizers run.
clean() {
  local deadline=$((SECONDS + 600)) left
  until kubectl delete --raw "/apis/shell.shelljob.dev/v1alpha1/namespaces/${NAMESPACE}/shelljobs?labelSelector=e2e.shelljob.dev%2Ftest" >/dev/null &&
    left="$(kubectl -n "${NAMESPACE}" get shelljobs -l e2e.shelljob.dev/test -o name --chunk-size=500 | wc -l)" && ((left == 0)); do
    ((SECONDS < deadline)) || die "the ShellJobs of an earlier run are still there after 10 minutes"
    sleep 2
  done
  kubectl -n "${NAMESPACE}" delete shellpools -l e2e.shelljob.dev/pool --ignore-not-found --wait --timeout=120s >&2
}

step "remove what an earlier run left" clean
if [[ "${1:-}" == --setup ]]; then
  echo "${context}"
  exit 0
fi

log "▶ go test -tags e2e ./test/e2e"
cd "${ROOT_DIR}"
E2E_CONTEXT="${context}" E2E_NAMESPACE="${NAMESPACE}" KUBECTL="${kubectl_bin}" HELM="${HELM:-${ROOT_DIR}/bin/helm}" \
  go test -tags e2e -count=1 -v -timeout "${E2E_TIMEOUT:-40m}" ${E2E_RUN:+-run "${E2E_RUN}"} ./test/e2e/
log "✔ e2e passed ($((SECONDS - start)) s)"
