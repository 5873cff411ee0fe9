#!/usr/bin/env bash
# Run the whole suite on a loaded machine: two busy loops beside it (a load of about 4 on
# 2 cores), RUNS times in a row (default 3), as issue 31 asks: CI machines are busy.
#
#   benchmarks/loaded_suite.sh [RUNS] [-- extra make test arguments, e.g. PYTEST_ARGS=-x]
#
# Prints each run's exit code and duration and the load average, writes
# out/loaded_suite.json, and exits with the number of failed runs (0: all passed).
set -uo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
shift || true
[[ "${1:-}" == "--" ]] && shift
mkdir -p out
busy() { while :; do :; done; }
busy & first=$!
busy & second=$!
trap 'kill $first $second 2>/dev/null' EXIT
failed=0
results=()
for ((k = 1; k <= runs; k++)); do
    start=$(date +%s)
    make test "$@" > "out/loaded_suite_run$k.log" 2>&1
    code=$?
    seconds=$(( $(date +%s) - start ))
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    echo "run $k: exit $code in ${seconds} s, load average $load (log: out/loaded_suite_run$k.log)"
    tail -n 1 "out/loaded_suite_run$k.log"
    [[ $code -ne 0 ]] && failed=$((failed + 1))
    results+=("{\"run\": $k, \"exit_code\": $code, \"seconds\": $seconds, \"load\": \"$load\"}")
done
printf '{"runs": [%s], "failed": %d}\n' "$(IFS=,; echo "${results[*]}")" "$failed" \
    > out/loaded_suite.json
echo "$failed of $runs runs failed"
exit "$failed"
