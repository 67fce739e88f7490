#!/usr/bin/env bash
# Run the whole test suite N times, each beside a CPU-heavy neighbour, for
# benchmarks/results/suite_runs.md ("3 times beside a CPU-heavy process").
#
#   scripts/suite_beside_load.sh 3 [OUT_DIR]      # OUT_DIR default /tmp/suite_loaded
#
# The neighbour is the embedded model (llama.cpp) judging 40-row batches with sem_filter in a
# loop on one thread, with share_cpu=off: it does not take the machine-wide CPU turns the
# suite's model tests take, so it competes for the cores as any other program would. It starts
# 20 s before each run and is killed after it; OUT_DIR/heavy-N.log has a line per batch, to show
# that it ran the whole time. Each run is `scripts/suite_runs.sh 1 OUT_DIR/rN`; it stops at
# the first failing run.
set -uo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
out=${2:-/tmp/suite_loaded}
mkdir -p "$out"
for n in $(seq 1 "$runs"); do
    python - >"$out/heavy-$n.log" 2>&1 <<'PY' &
import itertools, time
import duckdb_sem
con = duckdb_sem.connect(backend="llama:?threads=1&share_cpu=off", cache="off", scheduler="inprocess")
con.sql("CREATE TABLE t AS SELECT 'review number ' || i || ': the food was ' || CASE WHEN i % 3 = 0 "
        "THEN 'cold and late' ELSE 'warm and tasty' END AS r FROM range(100000) t(i)")
for k in itertools.count():
    t0 = time.time()
    n = con.sql(f"SELECT count(*) FROM (SELECT * FROM t LIMIT 40 OFFSET {k * 40}) "
                "WHERE sem_filter('{r} is a happy review')").fetchone()
    print(time.strftime("%H:%M:%S"), k, n, f"{time.time() - t0:.1f}s", flush=True)
PY
    heavy=$!
    sleep 20
    scripts/suite_runs.sh 1 "$out/r$n"
    rc=$?
    kill "$heavy"; wait "$heavy" 2>/dev/null
    echo "beside load $n rc=$rc $(tail -1 "$out/r$n/runs.txt")" | tee -a "$out/runs.txt"
    if (( rc != 0 )); then
        exit "$rc"
    fi
done
