"""A SIMULATED OpenAI-compatible server answering the query set from its labels.

``duckdb-sem sim-server`` with :class:`~workloads.oracle.WorkloadOracle` (the CLI takes only
CSV labels). Prints ``READY <base_url>``; each ``stats`` line on stdin prints the engine's
totals as JSON (virtual seconds, finished requests, prefill/decode/cached tokens).

    python benchmarks/workloads/serve.py --profile default --time-scale 1.0
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from duckdb_sem.backends.sim import SimBackend
from duckdb_sem.backends.sim.server import SimServer
from workloads.oracle import WorkloadOracle
from workloads.sim_profiles import profile


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profile", default="default")
    ap.add_argument("--time-scale", type=float, default=1.0)
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    backend = SimBackend(profile(args.profile), oracle=WorkloadOracle(),
                         time_scale=args.time_scale)  # fmt: skip
    server = SimServer(backend, port=args.port)
    server.start()
    print(f"READY {server.base_url} {server.model_id}", flush=True)
    for line in sys.stdin:
        if line.strip() == "stats":
            print(json.dumps(dataclasses.asdict(backend.stats())), flush=True)
    server.close()


if __name__ == "__main__":
    main()
