#!/usr/bin/env bash
# make demo: the bot on the kind cluster, talking to the fake Telegram.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
die "make demo is not available yet: it needs the Helm chart and the bot image (issues of the chart and the end-to-end suite). Until then: make kind-up, make e2e."
