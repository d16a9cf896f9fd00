#!/usr/bin/env bash
# Runs the benchmarks and prints their figures beside their baselines.
#
#   hack/bench.sh [SECTION...]    (make bench runs every section)
#
# Sections:
#   output   the output pipeline: internal/termrender and internal/liveoutput,
#            pure Go, no cluster, against the Python reference's figures.
#
# Environment: BENCHTIME (default 1s) and COUNT (default 5) are passed to
# go test; each figure is the median of the COUNT runs. BENCH_FORMAT=markdown
# prints Markdown tables, as BENCHMARKS.md holds them.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

BENCHTIME="${BENCHTIME:-1s}"
COUNT="${COUNT:-5}"
BENCH_FORMAT="${BENCH_FORMAT:-text}"
SECTIONS=(output)

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
}

main "$@"
