#!/usr/bin/env bash
# Every benchmark experiment at small scale (smoke test, < 10 minutes on 2 cores).
# Outputs go to benchmarks/results/quick/; full-scale results are left as they are.
set -euo pipefail
cd "$(dirname "$0")/.."
exec python benchmarks/run.py quick "$@"
