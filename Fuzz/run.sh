#!/usr/bin/env bash
# Runs each libFuzzer target for SECONDS (default 60) on a working copy of its seed corpus
# (Fuzz/corpus/<target>, never modified). Prints one line per target with the executions run;
# exits non-zero if any target found a crash (the input is left in .build-fuzz/crashes/).
# Usage: Fuzz/run.sh SECONDS [TARGET...]
# With FUZZ_RUNS=N in the environment each target stops after N executions (SECONDS stays the cap).
set -uo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=($(cd Fuzz && ls *.swift | sed 's/\.swift$//'))
Fuzz/build.sh "${targets[@]}" || exit 1
out=.build-fuzz
mkdir -p "$out/crashes"
status=0
printf '%-12s %14s %10s %8s %s\n' target executions exec/s corpus result
for t in "${targets[@]}"; do
    work=$out/corpus-$t
    rm -rf "$work"
    mkdir -p "$work"
    cp Fuzz/corpus/"$t"/* "$work"/ 2>/dev/null || true
    log=$out/$t.log
    runs_flag=()
    [ -n "${FUZZ_RUNS:-}" ] && runs_flag=(-runs="$FUZZ_RUNS")
    started=$(date +%s.%N)
    "$out/$t" "${runs_flag[@]}" -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$out/crashes/$t-" \
        -rss_limit_mb=2048 "$work" > "$log" 2>&1
    rc=$?
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
    rate=$(awk -v r="$runs" -v a="$started" -v b="$(date +%s.%N)" 'BEGIN { printf "%d", r / (b - a > 0 ? b - a : 1) }')
    files=$(ls "$work" | wc -l)
    if [ $rc -eq 0 ]; then result=ok; else result="CRASH (see $log)"; status=1; fi
    printf '%-12s %14s %10s %8s %s\n' "$t" "$runs" "$rate" "$files" "$result"
done
exit $status
