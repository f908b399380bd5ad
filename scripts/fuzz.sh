#!/usr/bin/env bash
# Fuzzes every public decoder with libFuzzer under AddressSanitizer: builds spark-fuzz with
# -sanitize=fuzzer,address (in .build/fuzz, apart from the normal build) and runs each harness
# for RUNS executions over a scratch copy of its corpus. Stops at the first crash; libFuzzer
# leaves the input in .build/fuzz/artifacts/. Keep such an input, once fixed, in
# Tests/Fuzz/corpus/<harness>/ (swift test replays that folder).
#
#   bash scripts/fuzz.sh                       every harness, 10,000,000 runs each
#   bash scripts/fuzz.sh --runs 20000          a short run (CI)
#   bash scripts/fuzz.sh --runs 1000000 jws    one harness
set -euo pipefail
cd "$(dirname "$0")/.."

runs=10000000
# Each process runs at most this many: a long-lived process's memory grows with some decoders
# (the plist one, in Foundation's parser on Linux: about 0.75 MB a thousand runs), so long runs
# go in several processes over the same corpus.
chunk=2000000
harnesses=()
while [ $# -gt 0 ]; do
    case "$1" in
        --runs) runs="$2"; shift 2 ;;
        -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
        *) harnesses+=("$1"); shift ;;
    esac
done

swift build --product spark-fuzz --scratch-path .build/fuzz -Xswiftc -sanitize=fuzzer,address >/dev/null
fuzzer=.build/fuzz/debug/spark-fuzz
[ ${#harnesses[@]} -gt 0 ] || mapfile -t harnesses < <(ASAN_OPTIONS=detect_leaks=0 "$fuzzer" --list)
# A listing that failed would fuzz nothing and pass: it must name every harness.
[ ${#harnesses[@]} -gt 0 ] || { echo "fuzz: spark-fuzz --list named no harness" >&2; exit 1; }

mkdir -p .build/fuzz/artifacts
for harness in "${harnesses[@]}"; do
    scratch=.build/fuzz/corpus/$harness
    mkdir -p "$scratch"
    log=.build/fuzz/$harness.log
    start=$(date +%s)
    executed=0
    left=$runs
    while [ "$left" -gt 0 ]; do
        step=$(( left < chunk ? left : chunk ))
        if ! ASAN_OPTIONS=detect_leaks=0 "$fuzzer" "$harness" -runs="$step" -max_len=65536 -timeout=10 -rss_limit_mb=4096 \
            -print_final_stats=1 -artifact_prefix=".build/fuzz/artifacts/$harness-" "$scratch" "Tests/Fuzz/corpus/$harness" \
            >"$log" 2>&1; then
            echo "fuzz: $harness CRASHED after $executed runs; see $log and .build/fuzz/artifacts/" >&2
            tail -n 30 "$log" >&2
            exit 1
        fi
        done_now=$(grep -a -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
        executed=$(( executed + done_now ))
        left=$(( left - step ))
    done
    echo "fuzz: $harness: $executed runs, 0 crashes, $(( $(date +%s) - start )) s"
done
