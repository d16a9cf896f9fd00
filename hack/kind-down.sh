#!/usr/bin/env bash
# Deletes the kind cluster KIND_CLUSTER, if there is one. Built images stay cached.
# env: KIND (the kind binary).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

KIND="${KIND:-${ROOT_DIR}/bin/kind}"
[[ -x "${KIND}" ]] || die "no kind at ${KIND}"
docker info >/dev/null 2>&1 || "${HACK_DIR}/docker-engine.sh"
with_lock "kind-cluster-${KIND_CLUSTER}" step "delete kind cluster ${KIND_CLUSTER}" "${KIND}" delete cluster --name "${KIND_CLUSTER}"
