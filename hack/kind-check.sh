#!/usr/bin/env bash
# Checks the kind cluster that `make kind-up` made:
#   - every node is Ready and CoreDNS runs;
#   - on every node, a pod of the worker image runs (its agent as PID 1,
#     non-root), answers `kubectl exec … -- zsh -c 'echo ok'`, and reaches
#     every CoreDNS pod (on whichever node it runs) and the API server's
#     Service over the pod network;
#   - a privileged pod of the same image runs, and can do what needs privileges (mount);
#   - a pod in a user namespace (hostUsers: false) runs as the worker pods
#     do: root in it is not the node's, with an unmasked /proc and the
#     workers' seccomp profile (hack/seccomp-profile.sh).
# The node runs stock containerd, which never stops an exec whose client went
# away; shelljob's own guarantee there (a job whose readers all left still
# ends, and leaves no process once stopped) is checked by the e2e suite.
# Its pods live in the namespace shelljob-kind-check, deleted at the end.
# env: KUBECTL (default bin/kubectl), KUBE_CONTEXT (default kind-KIND_CLUSTER).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

KUBECTL="${KUBECTL:-${ROOT_DIR}/bin/kubectl}"
context="${KUBE_CONTEXT:-kind-${KIND_CLUSTER}}"
ns=shelljob-kind-check
worker="${WORKER_IMAGE}:${IMAGE_TAG}"
kubectl() { "${KUBECTL}" --context "${context}" "$@"; }

# worker_pod NAME NODE: a pod of the worker image, restricted, on NODE.
worker_pod() {
  cat <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $1}
spec:
  nodeName: $2
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
YAML
}

pods() {
  kubectl delete namespace "${ns}" --ignore-not-found --wait=true --timeout=120s >/dev/null
  kubectl create namespace "${ns}" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  local n i=0
  for n in $(kubectl get nodes -o name); do
    worker_pod "worker-${i}" "${n#node/}"
    i=$((i + 1))
  done | kubectl -n "${ns}" apply -f - >/dev/null
  kubectl -n "${ns}" apply -f - >/dev/null <<YAML
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
---
apiVersion: v1
kind: Pod
metadata: {name: userns}
spec:
  hostUsers: false
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: ${worker}
    imagePullPolicy: Never
    command: [zsh, -c, 'exec sleep 100000']
    securityContext:
      runAsUser: 0
      allowPrivilegeEscalation: false
      procMount: Unmasked
      capabilities: {drop: [ALL], add: [CHOWN, KILL, SETGID, SETUID]}
      seccompProfile: {type: Localhost, localhostProfile: shelljob/worker.json}
YAML
  mapfile -t workers < <(kubectl -n "${ns}" get pods -o name | grep '/worker-' | sed 's|^pod/||')
  kubectl -n "${ns}" wait --for=condition=Ready pod --all --timeout=120s >&2
}

# reach POD: POD opens TCP connections (zsh's ztcp; the image has no network
# tools) to every CoreDNS pod and to the API server's Service.
reach() {
  local pod="$1" node targets
  node="$(kubectl -n "${ns}" get pod "${pod}" -o jsonpath='{.spec.nodeName}')"
  targets="$(kubectl -n kube-system get pods -l k8s-app=kube-dns -o jsonpath='{range .items[*]}{.status.podIP} 53 {end}')"
  targets+="$(kubectl get svc kubernetes -o jsonpath='{.spec.clusterIP}') 443"
  kubectl -n "${ns}" exec "${pod}" -- zsh -c '
    zmodload zsh/net/tcp || exit 1
    for host port in "$@"; do
      ztcp "$host" "$port" || { print -u2 "cannot reach $host:$port"; exit 1 }
      ztcp -c "$REPLY"
    done' zsh ${targets} || die "${pod} on ${node} cannot reach every CoreDNS pod and the API server"
  log "${pod} on ${node} reaches ${targets}"
}

check() {
  kubectl get nodes >&2
  kubectl wait --for=condition=Ready node --all --timeout=60s >&2
  kubectl -n kube-system get pods -l k8s-app=kube-dns >&2
  kubectl -n kube-system rollout status deployment/coredns --timeout=60s >&2
  step "pods of ${worker} on every node, and a privileged one" pods
  local out w
  for w in "${workers[@]}"; do
    out="$(kubectl -n "${ns}" exec "${w}" -- zsh -c 'echo ok')"
    [[ "${out}" == ok ]] || die "${w} answered '${out}'"
    log "${w}: zsh -c 'echo ok' → ${out}; $(kubectl -n "${ns}" exec "${w}" -- zsh -c 'id -u; ps -o pid,args -p 1 | tail -1' | tr '\n' ' ')"
    step "pod network from ${w}" reach "${w}"
  done
  kubectl -n "${ns}" exec privileged -- sh -c 'mount -t tmpfs none /mnt && umount /mnt' ||
    die "the privileged pod cannot mount"
  log "privileged: mount works; $(kubectl -n "${ns}" exec privileged -- grep CapBnd /proc/self/status)"
  local map
  map="$(kubectl -n "${ns}" exec userns -- cat /proc/self/uid_map | tr -s ' ')"
  [[ "${map}" =~ ^\ ?0\ ([0-9]+)\ 65536$ && "${BASH_REMATCH[1]}" != 0 ]] ||
    die "the pod with hostUsers: false is not in a user namespace of its own: uid_map '${map}'"
  log "userns: uid_map '${map}'"
}

cleanup() { kubectl delete namespace "${ns}" --wait=false >/dev/null 2>&1 || true; }
trap cleanup EXIT
step "check kind cluster ${KIND_CLUSTER}" check
