#!/usr/bin/env bash
# Run the whole test suite (the README's pytest) N times in a row and record each run: its
# load average, wall time, pass/fail counts and slowest tests, for
# benchmarks/results/suite_runs.md ("the whole suite passing 10 times in a row").
#
#   scripts/suite_runs.sh 10 [OUT_DIR] [pytest args...]   # OUT_DIR default /tmp/suite_runs
#
# Each run writes OUT_DIR/run-N.log (pytest's output with --durations=40), OUT_DIR/run-N.xml
# (JUnit) and OUT_DIR/run-N.load (the load average every 30 s); OUT_DIR/runs.txt gets one line
# per run. It stops at the first failing run unless KEEP_GOING=1.
#
# SIGINT is reset to its default for pytest: a script started in the background (`... &`)
# ignores SIGINT and so would every test's child, which broke the Ctrl-C test once.
set -uo pipefail
cd "$(dirname "$0")/.."
runs=${1:-10}
out=${2:-/tmp/suite_runs}
shift $(( $# >= 2 ? 2 : $# ))
mkdir -p "$out"
for n in $(seq 1 "$runs"); do
    ( while true; do echo "$(date -u +%T) $(cat /proc/loadavg)"; sleep 30; done ) >"$out/run-$n.load" &
    sampler=$!
    start=$(date +%s)
    python -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])' \
        pytest --durations=40 -p no:cacheprovider --junitxml="$out/run-$n.xml" "$@" >"$out/run-$n.log" 2>&1
    rc=$?
    kill "$sampler"
    summary=$(grep -E '(passed|failed|error).* in [0-9.]+s' "$out/run-$n.log" | tail -1)
    echo "run $n $(date -u +%FT%TZ) rc=$rc wall=$(( $(date +%s) - start ))s load(1,5,15)=$(cut -d' ' -f1-3 /proc/loadavg) $summary" | tee -a "$out/runs.txt"
    if (( rc != 0 )) && [[ "${KEEP_GOING:-0}" != 1 ]]; then
        exit "$rc"
    fi
done
