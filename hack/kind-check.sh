#!/usr/bin/env bash
# Checks the kind cluster that `make kind-up` made, as its issue asks:
#   - the node is Ready and CoreDNS runs;
#   - a pod of the worker image runs (its agent as PID 1, non-root) and answers
#     `kubectl exec … -- zsh -c 'echo ok'`;
#   - a privileged pod of the same image runs, and can do what needs privileges (mount);
#   - an interrupted `kubectl exec … -- sh -c 'sleep 100'` (SIGINT to kubectl)
#     leaves no process behind in the pod.
# Its pods live in the namespace shelljob-kind-check, deleted at the end.
# env: KUBECTL (default bin/kubectl), KUBE_CONTEXT (default kind-KIND_CLUSTER).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

KUBECTL="${KUBECTL:-${ROOT_DIR}/bin/kubectl}"
context="${KUBE_CONTEXT:-kind-${KIND_CLUSTER}}"
ns=shelljob-kind-check
worker="${WORKER_IMAGE}:${IMAGE_TAG}"
kubectl() { "${KUBECTL}" --context "${context}" "$@"; }

pods() {
  kubectl delete namespace "${ns}" --ignore-not-found --wait=true --timeout=120s >/dev/null
  kubectl create namespace "${ns}" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  kubectl -n "${ns}" apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: worker}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: worker
    image: ${worker}
    imagePullPolicy: Never
    securityContext:
      runAsNonRoot: true
      allowPrivilegeEscalation: false
      capabilities: {drop: [ALL]}
      seccompProfile: {type: RuntimeDefault}
---
apiVersion: v1
kind: Pod
metadata: {name: privileged}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: ${worker}
    imagePullPolicy: Never
    securityContext: {privileged: true, runAsUser: 0}
YAML
  kubectl -n "${ns}" wait --for=condition=Ready pod/worker pod/privileged --timeout=120s >&2
}

# interrupt POD: SIGINT to a kubectl exec of `sleep 100`, then no sleep may be left.
interrupt() {
  local pod="$1" pid
  # A background job of a script ignores SIGINT unless told otherwise.
  env --default-signal=INT "${KUBECTL}" --context "${context}" -n "${ns}" exec "${pod}" -- sh -c 'sleep 100' &
  pid=$!
  for _ in $(seq 1 20); do
    kubectl -n "${ns}" exec "${pod}" -- ps -eo args | grep -qx 'sleep 100' && break
    sleep 0.5
  done
  kubectl -n "${ns}" exec "${pod}" -- ps -eo pid,args | grep -q 'sleep 100' || die "sleep 100 never started in ${pod}"
  local t=$SECONDS rc=0
  kill -INT "${pid}"
  wait "${pid}" || rc=$?
  log "${pod}: kubectl exec ended $((SECONDS - t)) s after SIGINT (exit ${rc})"
  (( SECONDS - t < 10 )) || die "kubectl exec did not stop on SIGINT"
  for _ in $(seq 1 20); do
    # Nothing of it may be left, not even a zombie (PID 1, the agent, reaps).
    if ! kubectl -n "${ns}" exec "${pod}" -- ps -eo args | grep -q 'sleep'; then
      log "${pod}: after SIGINT to kubectl: $(kubectl -n "${ns}" exec "${pod}" -- ps -eo pid,args | tr -s ' \n' ' ')"
      return 0
    fi
    sleep 0.5
  done
  die "${pod}: sleep 100 still runs after kubectl exec was interrupted"
}

check() {
  kubectl get nodes >&2
  kubectl wait --for=condition=Ready node --all --timeout=60s >&2
  kubectl -n kube-system get pods -l k8s-app=kube-dns >&2
  kubectl -n kube-system rollout status deployment/coredns --timeout=60s >&2
  step "pods of ${worker}: plain and privileged" pods
  local out
  out="$(kubectl -n "${ns}" exec worker -- zsh -c 'echo ok')"
  [[ "${out}" == ok ]] || die "worker answered '${out}'"
  log "worker: zsh -c 'echo ok' → ${out}; $(kubectl -n "${ns}" exec worker -- zsh -c 'id -u; ps -o pid,args -p 1 | tail -1' | tr '\n' ' ')"
  kubectl -n "${ns}" exec privileged -- sh -c 'mount -t tmpfs none /mnt && umount /mnt' ||
    die "the privileged pod cannot mount"
  log "privileged: mount works; $(kubectl -n "${ns}" exec privileged -- grep CapBnd /proc/self/status)"
  step "interrupt kubectl exec in worker" interrupt worker
  step "interrupt kubectl exec in privileged" interrupt privileged
}

cleanup() { kubectl delete namespace "${ns}" --wait=false >/dev/null 2>&1 || true; }
trap cleanup EXIT
step "check kind cluster ${KIND_CLUSTER}" check
