#!/usr/bin/env bash
# Runs the benchmarks and prints their figures beside their baselines.
#
#   hack/bench.sh [SECTION...]    (make bench runs every section)
#
# Sections:
#   output   the output pipeline: internal/termrender and internal/liveoutput,
#            pure Go, no cluster, against the Python reference's figures.
#   cluster  the operator on the kind cluster (hack/e2e.sh --setup brings it
#            up and deploys), beside plain kubectl exec in the same run: start
#            latency, throughput read back through the agent, stop latency,
#            each step of a start and a stop, and a burst of 300 jobs through
#            16 workers with its API writes per job.
#   cli      `kubectl shelljob exec -- echo hi` beside `kubectl exec POD --
#            echo hi`, whole processes, E2E_BENCH_CLI_RUNS runs each (30).
#   chat     the whole stack through the fake Telegram: message to reply,
#            to first preview, .k to final, at rest and with the pool busy,
#            beside plain kubectl exec; a soak of E2E_SOAK_JOBS (500)
#            jobs that counts what was lost, peak memory and API writes;
#            then the bot's memory through E2E_FLOODS (1,16) `yes` floods
#            at once, stopped after 10 s, beside its memory at rest.
#            E2E_FLOODS=1,16,64 adds 64, which scales the shell pool to 64
#            workers; on a 2-CPU machine it starves the cluster.
#   memory   the operator's memory with ShellJobs of 64 KiB commands in the
#            namespace, beside its memory at rest in the same run (its
#            container's cgroup on the kind node): E2E_BENCH_QUEUED (1,000)
#            jobs queued behind busy workers, then placed, at a pace beside a
#            burst of as many of the same jobs; E2E_BENCH_FINISHED (10,000)
#            finished ones, and the operator restarted with them there. The
#            bot, the API server and etcd are measured through the same.
#
# Environment: BENCHTIME (default 1s) and COUNT (default 5) are passed to
# go test; each figure is the median of the COUNT runs. BENCH_FORMAT=markdown
# prints Markdown tables, as BENCHMARKS.md holds them.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

BENCHTIME="${BENCHTIME:-1s}"
COUNT="${COUNT:-5}"
BENCH_FORMAT="${BENCH_FORMAT:-text}"
SECTIONS=(output cluster chat cli memory)

machine() {
  local cpu
  cpu="$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
  printf 'machine: %s CPUs (nproc), %s, %s\n' "$(nproc)" "${cpu:-unknown CPU}" "$(go env GOVERSION)"
}

# go_bench LOG PKG...: runs the Go benchmarks of PKG into LOG, as
# "name ns/op MB/s" lines.
go_bench() {
  local log="$1"; shift
  (cd "${ROOT_DIR}" && go test -run='^$' -bench=. -benchtime="${BENCHTIME}" -count="${COUNT}" "$@") |
    awk '/^Benchmark/ {
      name = $1; sub(/-[0-9]+$/, "", name); ns = ""; mb = ""
      for (i = 2; i <= NF; i++) { if ($i == "ns/op") ns = $(i-1); if ($i == "MB/s") mb = $(i-1) }
      print name, ns, mb
    }' > "${log}"
  [[ -s "${log}" ]] || die "no benchmark ran in $*"
}

# median LOG NAME FIELD: the median of FIELD (2 ns/op, 3 MB/s) over NAME's runs.
median() {
  awk -v n="$2" -v f="$3" '$1 == n { print $f }' "$1" | sort -g |
    awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2) }'
}

# table TITLE LOG ROW...: prints ROWs, "label|benchmark|reference MiB/s", where
# the reference is a number, "-" for none, or "@SECONDS" for the seconds the
# reference took on the benchmark's whole input.
table() {
  local title="$1" log="$2"; shift 2
  local row label name ref mb ns mibs refmibs ratio
  if [[ "${BENCH_FORMAT}" == markdown ]]; then
    printf '| %s | Go MiB/s | reference MiB/s | ratio |\n|---|---:|---:|---:|\n' "${title}"
  else
    printf '%-46s %10s %16s %8s\n' "${title}" "Go MiB/s" "reference MiB/s" "ratio"
  fi
  for row in "$@"; do
    IFS='|' read -r label name ref <<< "${row}"
    mb="$(median "${log}" "${name}" 3)"
    ns="$(median "${log}" "${name}" 2)"
    [[ -n "${mb}" ]] || die "no result for ${name}"
    # Go's MB/s is 10^6 bytes a second.
    mibs="$(awk -v m="${mb}" 'BEGIN { printf "%.0f", m * 1e6 / 1048576 }')"
    case "${ref}" in
      -) refmibs="—" ;;
      @*) refmibs="$(awk -v m="${mb}" -v ns="${ns}" -v s="${ref#@}" \
            'BEGIN { printf "%.1f", m * ns / 1000 / 1048576 / s }')" ;;
      *) refmibs="${ref}" ;;
    esac
    if [[ "${refmibs}" == "—" ]]; then
      ratio="—"
    else
      ratio="$(awk -v a="${mibs}" -v b="${refmibs}" 'BEGIN { printf "%.0f×", a / b }')"
    fi
    if [[ "${BENCH_FORMAT}" == markdown ]]; then
      printf '| %s | %s | %s | %s |\n' "${label}" "${mibs}" "${refmibs}" "${ratio}"
    else
      printf '%-46s %10s %16s %8s\n' "${label}" "${mibs}" "${refmibs}" "${ratio}"
    fi
  done
  echo
}

section_output() {
  local log
  log="$(mktemp)"
  # shellcheck disable=SC2064
  trap "rm -f '${log}'" RETURN
  log "output pipeline: go test -bench (benchtime ${BENCHTIME}, median of ${COUNT})"
  go_bench "${log}" ./internal/termrender ./internal/liveoutput
  echo "== Output pipeline =="
  # The reference's figures (reference/shell_streaming.md, "The terminal
  # renderer"): seconds per MiB, or 0.06 s for a 1 MiB line with 2000
  # redraws under it.
  table "termrender, whole output in one write" "${log}" \
    "ordinary lines|BenchmarkRender/ordinary_lines|50" \
    "dense \\r frames (tqdm)|BenchmarkRender/tqdm_frames|16.7" \
    "coloured lines (grep --color=always)|BenchmarkRender/coloured_lines|11.1" \
    "one long line of grep matches|BenchmarkRender/long_grep_line|2.86" \
    "one long coloured line (jq -C -c)|BenchmarkRender/long_jq_line|5.0" \
    "2000 redraws over a 1 MiB line|BenchmarkRender/redraws_over_1MiB_line|@0.06"
  table "termrender, 4 KiB writes" "${log}" \
    "ordinary lines|BenchmarkRendererStream/ordinary_lines|50" \
    "dense \\r frames (tqdm)|BenchmarkRendererStream/tqdm_frames|16.7" \
    "coloured lines (grep --color=always)|BenchmarkRendererStream/coloured_lines|11.1"
  table "liveoutput" "${log}" \
    "Write, 4 KiB chunks from 8 goroutines|BenchmarkWrite/4KiB_chunks_8_goroutines|-" \
    "the same, with a reader rendering previews|BenchmarkWrite/4KiB_chunks_8_goroutines_with_preview_reader|-" \
    "TailText of a full 16 KiB window, rendered|BenchmarkTailText|-"
}

# BENCH_LOG is the output of the last e2e_bench, for bench.
BENCH_LOG=""
# FAILED lists the e2e benchmarks that failed; bench.sh then exits 1.
FAILED=()

# e2e_bench TEST TIMEOUT: runs test/e2e's TEST on the stack (hack/e2e.sh
# --setup) with E2E_BENCH=1 into BENCH_LOG; the test prints
# "BENCH name value unit" lines. A test that fails an assertion (a bar
# not met, something lost) still has its figures printed, and bench.sh
# exits 1 at the end; one that left a figure out stops the section. The
# caller removes BENCH_LOG.
e2e_bench() {
  local test="$1" timeout="$2" context
  context="$("${HACK_DIR}/e2e.sh" --setup | tail -n 1)"
  BENCH_LOG="$(mktemp)"
  log "go test -tags e2e -run ${test} on ${context}"
  if ! (cd "${ROOT_DIR}" && E2E_BENCH=1 E2E_CONTEXT="${context}" KUBECTL="$("${HACK_DIR}/kube-binaries.sh" kubectl)/kubectl" \
    go test -tags e2e -count=1 -v -timeout "${timeout}" -run "^${test}\$" ./test/e2e/) > "${BENCH_LOG}"; then
    grep -E '^\s*(--- FAIL|[a-z_]+_test\.go:[0-9]+:)' "${BENCH_LOG}" | tail -30 >&2 || tail -30 "${BENCH_LOG}" >&2
    log "${test} failed; its figures follow"
    FAILED+=("${test}")
  fi
}

# bench NAME: the value of figure NAME in BENCH_LOG.
bench() { awk -v n="$1" '$1 == "BENCH" && $2 == n { print $3 }' "${BENCH_LOG}"; }

# ratio_table WIDTHS OURS BASELINE ROW...: prints ROWs, "label|figure|baseline
# figure" (or "=N" for a fixed baseline), each with its ratio to the
# baseline, which reads as "times the baseline": above 1 is slower for
# latencies, faster for throughput. WIDTHS is "label ours baseline" for the
# text format; OURS and BASELINE head the columns.
ratio_table() {
  local widths ours_head="$2" base_head="$3" row label ours base ratio fmt
  read -r -a widths <<< "$1"
  shift 3
  fmt="%-${widths[0]}s %${widths[1]}s %${widths[2]}s %8s\n"
  [[ "${BENCH_FORMAT}" != markdown ]] || fmt='| %s | %s | %s | %s |\n'
  printf "${fmt}" "measure" "${ours_head}" "${base_head}" "ratio"
  [[ "${BENCH_FORMAT}" != markdown ]] || printf '|---|---:|---:|---:|\n'
  for row in "$@"; do
    IFS='|' read -r label ours base <<< "${row}"
    ours="$(bench "${ours}")"
    if [[ "${base}" == =* ]]; then base="${base#=}"; else base="$(bench "${base}")"; fi
    [[ -n "${ours}" && -n "${base}" ]] || die "no figure for ${label}"
    ratio="$(awk -v a="${ours}" -v b="${base}" 'BEGIN { printf "%.2f×", a / b }')"
    # shellcheck disable=SC2059
    printf "${fmt}" "${label}" "${ours}" "${base}" "${ratio}"
  done
}

# section_cluster: TestBenchCluster and TestBenchBurst, each figure beside
# plain kubectl exec measured in the same run. E2E_BENCH_JOBS sets the jobs
# of the start latency (default 50), E2E_BENCH_BURST those of the burst
# (default 300).
section_cluster() {
  e2e_bench 'TestBench(Cluster|Burst)' 40m
  # shellcheck disable=SC2064
  trap "rm -f '${BENCH_LOG}'" RETURN
  echo "== Cluster (kind, ${E2E_BENCH_JOBS:-50} jobs for start latency) =="
  ratio_table "40 12 14" shelljob "kubectl exec" \
    "start latency p50 (ms)|start_p50|start_base_p50" \
    "start latency p95 (ms)|start_p95|start_base_p95" \
    "  the operator's warm channel, p50 (ms)|start_warm_p50|start_base_p50" \
    "  the operator's warm channel, p95 (ms)|start_warm_p95|start_base_p95" \
    "  an exec per follow, p50 (ms)|start_cold_p50|start_base_p50" \
    "  an exec per follow, p95 (ms)|start_cold_p95|start_base_p95" \
    "throughput, 256 MiB of zeros (MiB/s)|throughput|throughput_base" \
    "  of it, bytes the reader got (MiB/s)|throughput_delivered|throughput_base" \
    "stop latency p50 (ms)|stop_p50|stop_base_p50" \
    "burst of $(bench burst_jobs) jobs, 16 workers (s)|burst_s|burst_base_s"
  echo "(the reader got $(bench delivered) MiB of the 256: the spool keeps the first and last 16 MiB, and a"
  echo " reader that falls behind by more than that gets a gap line instead of the bytes it missed)"
  echo
  echo "(start latency and throughput: read through the stream API's log subresource, opened right after"
  echo " the create, as the bot and kubectl shelljob read; beside it, a follower of its own with a warm"
  echo " channel to each worker's agent, and one with an exec of the agent per follow, the paths before it)"
  echo
  echo "Where a start goes, p50 from the create call (the stream API follower opens at the create):"
  printf '  %-44s %8s ms\n' "create call returned" "$(bench start_step_create_p50)" \
    "watch shows the placement (number, placement)" "$(bench start_step_placed_p50)" \
    "watch shows Running (start over the channel)" "$(bench start_step_running_p50)" \
    "first byte read by the follower" "$(bench start_p50)" \
    "one agent exec round trip, for comparison" "$(bench exec_roundtrip_p50)"
  echo "Where a stop goes, p50 from the stop patch:"
  printf '  %-44s %8s ms\n' "patch call returned" "$(bench stop_step_patch_p50)" \
    "watch shows the first signal sent" "$(bench stop_step_signal_p50)" \
    "watch shows Stopped" "$(bench stop_p50)"
  echo "Burst: $(bench burst_lost) jobs lost; API writes per job: $(bench burst_writes_per_job), of which:"
  awk '$1 == "BENCH" && $2 ~ /^burst_writes_per_job_/ { sub(/^burst_writes_per_job_/, "", $2); printf "  %-44s %8s\n", $2, $3 }' "${BENCH_LOG}"
  echo
}

# FLOOD_CLASSES are TestBenchChatFloods' floodClasses, two finals at once each.
FLOOD_CLASSES=(colour cr binary)

# section_chat: TestBenchChat, the whole stack through the fake Telegram.
section_chat() {
  local floods=() rows n c
  IFS=', ' read -r -a floods <<< "${E2E_FLOODS:-1,16}"
  e2e_bench 'TestBenchChat(Floods)?' 60m
  # shellcheck disable=SC2064
  trap "rm -f '${BENCH_LOG}'" RETURN
  rows=(
    "message to reply, .a true, p50 (ms)|chat_reply_p50|chat_reply_base_p50"
    "message to reply, .a true, p95 (ms), beside exec's p95|chat_reply_p95|chat_reply_base_p95"
    "message to reply, .a true, p95 (ms), beside exec's p50|chat_reply_p95|chat_reply_base_p50"
    "message to first preview (ms; reference: 2000)|chat_preview_p50|=2000"
    ".k to final, sleep 100, p50 (ms)|chat_stop_p50|chat_stop_base_p50"
    "pool busy: message to reply p50 (ms)|chat_busy_reply_p50|chat_busy_reply_base_p50"
    "pool busy: .k to final p50 (ms)|chat_busy_stop_p50|chat_stop_base_p50"
  )
  for n in "${floods[@]}"; do
    rows+=("flood of ${n} yes, 10 s: bot peak memory (MiB)|chat_flood_${n}_peak_mem|chat_flood_${n}_idle_mem"
      "flood of ${n} yes: bot memory a minute after (MiB)|chat_flood_${n}_after_mem|chat_flood_${n}_idle_mem")
  done
  for c in "${FLOOD_CLASSES[@]}"; do
    rows+=("2 ${c} finals at once: bot peak memory (MiB)|chat_flood_${c}_peak_mem|chat_flood_${c}_idle_mem"
      "2 ${c} finals: bot memory a minute after (MiB)|chat_flood_${c}_after_mem|chat_flood_${c}_idle_mem")
  done
  echo "== Through the bot (kind, the fake Telegram's clock) =="
  ratio_table "46 12 12" shelljob baseline "${rows[@]}"
  echo "(baselines: plain kubectl exec of the same command, or of pkill -INT for a stop, in the same run;"
  echo " for a flood, the bot container's memory at rest just before it, from its cgroup on the kind node)"
  for n in "${floods[@]}" "${FLOOD_CLASSES[@]}"; do
    printf 'flood of %s: peak %s MiB above the rest (bar: under 64), %s finals lost, each final from at least %s MiB kept\n' \
      "${n}" "$(awk -v p="$(bench "chat_flood_${n}_peak_mem")" -v i="$(bench "chat_flood_${n}_idle_mem")" 'BEGIN { printf "%.1f", p - i }')" \
      "$(bench "chat_flood_${n}_finals_lost")" "$(bench "chat_flood_${n}_min_kept")"
  done
  echo
  echo "== Soak: $(bench soak_jobs) jobs through the 16-worker pool from the fake Telegram =="
  printf '%-34s %s\n' "time" "$(bench soak_seconds) s" \
    "jobs lost" "$(bench soak_jobs_lost)" "finals lost" "$(bench soak_finals_lost)" "lines lost" "$(bench soak_lines_lost)" \
    "peak memory: operator" "$(bench soak_peak_mem_operator) MiB" "peak memory: bot" "$(bench soak_peak_mem_bot) MiB" \
    "peak memory: a worker (highest)" "$(bench soak_peak_mem_worker) MiB" "API writes per job" "$(bench soak_api_writes_per_job)"
  echo
}

# section_cli: TestBenchCLI, whole processes of both commands.
section_cli() {
  e2e_bench TestBenchCLI 30m
  # shellcheck disable=SC2064
  trap "rm -f '${BENCH_LOG}'" RETURN
  echo "== kubectl shelljob exec (kind, ${E2E_BENCH_CLI_RUNS:-30} runs each, process start to exit) =="
  ratio_table "44 22 14" "kubectl shelljob exec" "kubectl exec" \
    "echo hi, p50 (ms)|cli_exec_p50|cli_exec_base_p50" \
    "echo hi, p95 (ms)|cli_exec_p95|cli_exec_base_p95" \
    "echo hi, right after another, p50 (ms)|cli_exec_fresh_p50|cli_exec_base_p50" \
    "echo hi, right after another, p95 (ms)|cli_exec_fresh_p95|cli_exec_base_p95"
  echo "(targets: at most 0.8× at p50, and 1.0× at p95)"
  echo
}

# above_table REST ROW...: prints ROWs, "label|figure", each in MiB beside
# the figure REST of the same run and how far above it it is.
above_table() {
  local rest row label name v r fmt
  rest="$(bench "$1")"
  shift
  fmt="%-56s %10s %10s %12s\n"
  [[ "${BENCH_FORMAT}" != markdown ]] || fmt='| %s | %s | %s | %s |\n'
  # shellcheck disable=SC2059
  printf "${fmt}" "measure" "MiB" "at rest" "above rest"
  [[ "${BENCH_FORMAT}" != markdown ]] || printf '|---|---:|---:|---:|\n'
  for row in "$@"; do
    IFS='|' read -r label name <<< "${row}"
    v="$(bench "${name}")"
    [[ -n "${v}" && -n "${rest}" ]] || die "no figure for ${label}"
    r="$(awk -v a="${v}" -v b="${rest}" 'BEGIN { printf "%+.1f", a - b }')"
    # shellcheck disable=SC2059
    printf "${fmt}" "${label}" "${v}" "${rest}" "${r}"
  done
}

# section_memory: TestBenchOperatorMemory.
section_memory() {
  e2e_bench TestBenchOperatorMemory 120m
  # shellcheck disable=SC2064
  trap "rm -f '${BENCH_LOG}'" RETURN
  local q f
  q="$(printf '%.0f' "$(bench opmem_queued_jobs)")" f="$(printf '%.0f' "$(bench opmem_finished_jobs)")"
  echo "== The operator's memory with ShellJobs of 64 KiB commands (kind, its container's cgroup) =="
  above_table opmem_rest \
    "${q} queued: peak while created and queued|opmem_queued_peak" \
    "${q} queued, settled|opmem_queued" \
    "${q} queued: peak while placed and run|opmem_place_peak" \
    "${f} finished: peak while created and ended|opmem_finished_peak" \
    "${f} finished, settled|opmem_finished" \
    "${f} finished: peak of a restart with them|opmem_restart_peak" \
    "${f} finished: after that restart, settled|opmem_restart"
  echo "(bar: under 64 MiB above the rest; the operator's restarts: $(bench opmem_restarts), its jobs lost: $(bench opmem_queued_lost))"
  printf '%s queued jobs placed and run at %s jobs/s, beside %s jobs/s for as many of the same jobs created at once on free workers\n' \
    "${q}" "$(bench opmem_queued_pace)" "$(bench opmem_burst_pace)"
  printf '%s finished jobs created in %s s, all ended %s s after the first create\n' \
    "${f}" "$(bench opmem_finished_create_s)" "$(bench opmem_finished_end_s)"
  printf 'restarted with them there, the operator led and ended a job %s s after its pods were deleted\n' \
    "$(bench opmem_restart_ready_s)"
  echo
  echo "== The bot through the same ${f} finished jobs =="
  above_table botmem_rest \
    "peak while created and ended|botmem_finished_peak" \
    "settled|botmem_finished" \
    "peak of a restart with them|botmem_restart_peak" \
    "after that restart, settled|botmem_restart"
  echo
  echo "== The API server and etcd through the same =="
  above_table apimem_rest \
    "API server: peak|apimem_finished_peak" \
    "API server: settled|apimem_finished"
  local quota_from="etcd's default, no --quota-backend-bytes"
  [[ "$(bench etcd_quota_set)" == 0.0 ]] || quota_from="--quota-backend-bytes"
  printf 'etcd database: %s MiB at rest, %s MiB with the finished jobs, %s MiB once they were deleted; its quota %s MiB (%s)\n' \
    "$(bench etcd_rest)" "$(bench etcd_finished)" "$(bench etcd_after)" "$(bench etcd_quota)" "${quota_from}"
  echo
}

main() {
  local sections=("$@") s
  [[ ${#sections[@]} -gt 0 ]] || sections=("${SECTIONS[@]}")
  for s in "${sections[@]}"; do
    declare -F "section_${s}" >/dev/null || die "no section ${s}; sections: ${SECTIONS[*]}"
  done
  machine
  echo
  for s in "${sections[@]}"; do
    "section_${s}"
  done
  [[ ${#FAILED[@]} -eq 0 ]] || die "failed: ${FAILED[*]}"
}

main "$@"
