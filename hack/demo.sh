#!/usr/bin/env bash
# make demo: the whole stack on kind (hack/stack.sh: the operator, the bot and
# the worker pools from the chart, and the fake Telegram), then a terminal
# chat with the bot in which you are the admin. Ctrl-D leaves the chat; the
# cluster stays up for `kubectl get sj`.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

NAMESPACE="${STACK_NAMESPACE:-shelljob-system}"
context="$("${HACK_DIR}/stack.sh" | tail -n 1)"
[[ -n "${context}" ]] || die "hack/stack.sh printed no kubeconfig context"
kubectl_bin="$("${HACK_DIR}/kube-binaries.sh" kubectl)/kubectl"

cat >&2 <<TEXT

  shelljob is up on the kind cluster (context ${context}).
  You are the bot's admin in a chat with it, through the fake Telegram.
  Try:   .a echo hello from \$(hostname)      .a for i in {1..20}; do echo \$i; sleep 1; done
         .k  (stop)   .af cd /tmp   .af pwd   /group .a uptime   /help (the chat's own commands)
  Ctrl-D leaves the chat. The cluster stays up:
         ${kubectl_bin} --context ${context} -n ${NAMESPACE} get sj

TEXT
[[ -t 0 ]] || log "stdin is not a terminal: reading the chat's lines from it"
tty=(-i)
[[ ! -t 0 ]] || tty=(-it)
exec "${kubectl_bin}" --context "${context}" -n "${NAMESPACE}" exec "${tty[@]}" deploy/shelljob-faketg -- \
  /faketg -connect http://127.0.0.1:8080 -files /tmp/files
