#!/usr/bin/env bash
# Prints a directory holding kube-apiserver, etcd and kubectl for envtest
# (KUBEBUILDER_ASSETS), building them from source on first use.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

kube="$("${HACK_DIR}/kube-binaries.sh" kube-apiserver kubectl)"
etcd="$("${HACK_DIR}/etcd.sh")"
assets="${SHELLJOB_CACHE}/envtest/${KUBE_VERSION}-${ETCD_VERSION}"
mkdir -p "${assets}"
ln -sf "${kube}/kube-apiserver" "${kube}/kubectl" "${etcd}/etcd" "${assets}/"
echo "${assets}"
