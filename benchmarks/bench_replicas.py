"""Benchmark (information, SIMULATED): N replicas, least-loaded against cache-aware placement.

SeqoFlow-style continuous arrival (``bench_arrival``'s Static-1 traces of the query set) on 1,
2, 4 and 8 SIMULATED Qwen3-32B/H200 replicas, each with vLLM's automatic prefix caching over
its own KV budget (``backends/sim/blocks.py``), for two workloads (``_replicas_workload.py``):
the query set as written, and with per-call few-shot examples. Two parts, both through the
real :class:`~duckdb_sem.scheduler.core.Scheduler`:

- **virtual clock** (no real sleeping, so not disturbed by a busy CPU): ``bench_scheduler``'s
  discrete-event loop sweeps offered load per replica count, for the scheduler's placements
  ``least-loaded`` and ``prefix-affinity``. Reports throughput at equal P50 (the highest
  offered rate whose P50 stays within one SLO for every N), P99, prefix hit rate, and scaling
  efficiency per replica (capacity at N / (N x capacity at 1)), all ratios of one run.
- **real time** (short): N ``duckdb-sem sim-server`` processes (``--time-scale``), and a burst of
  queries replayed through the scheduler with N ``openai:`` backends (least-loaded,
  prefix-affinity) or one ``openai:`` backend pointing at ``vllm-router`` started in front of
  the N servers as a user would run it (``--policy cache_aware``, and ``round_robin`` as a
  control). Reports makespan, P50/P99 and the servers' own prefix hit rate
  (``vllm:prefix_cache_hits/queries`` from their ``/metrics``).

Writes ``results/replicas.{csv,md,png}``. Every figure is SIMULATED; real-time ones are marked.
The parts can run apart and be merged (``--real-only``, ``--report-from``; docs/benchmarks.md).

    python benchmarks/bench_replicas.py [--queries 60 --replicas 1 2 4 8 --real-queries 8]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _replicas_report
import bench_arrival as arrival
import bench_scheduler as sched_bench
from _replicas_workload import TENANTS, WORKLOADS, FewShot
from _results import RESULTS
from workloads.queries import QUERIES
from workloads.runner import Step, run_query, written_plan

from duckdb_sem.scheduler.placement import make_placement

PLACEMENTS = ("least-loaded", "prefix-affinity")
PROFILE = "qwen3-32b-h200"
LOADS = (0.4, 0.7, 1.0, 1.3, 1.6)


class ReplicaLoop(arrival.ArrivalLoop):
    """The arrival loop with a chosen placement, counting prefix-cache hits per GPU step."""

    def __init__(self, *, replicas: int, placement: str, profile: str) -> None:
        super().__init__(
            sched_bench.build_policy(arrival.POLICY),
            profile=profile,
            replicas=replicas,
            fusion=False,
        )
        self.scheduler.placement = make_placement(placement)
        self.queried = 0
        self.cached = 0

    def _stepped(self, result: Any) -> None:
        self.queried += result.queried_tokens
        self.cached += result.cached_tokens


def traces() -> tuple[dict[str, list[Step]], FewShot]:
    """Static-1 traces of every query (the plan of its SQL as written), answers recorded, and
    the few-shot workload built on them."""
    out = {}
    for q in QUERIES:
        outcome = run_query(q, "static", plan=written_plan(q, q.sql))
        out[q.name] = outcome.trace
        for step in outcome.trace:
            for r, c in zip(step.requests, step.completions, strict=True):
                arrival.ANSWERS[(r.prefix, r.row)] = c
    few = FewShot(out, arrival.ANSWERS)
    sched_bench._answer = few.answer  # the loop asks this module-level hook for answers
    return out, few


def add_arrivals(
    loop: ReplicaLoop,
    tr: dict[str, list[Step]],
    few: FewShot | None,
    n: int,
    rate: float,
    seed: int,
) -> None:
    """``bench_arrival``'s Poisson arrivals; with ``few`` each query is a seeded (tenant,
    query) pair carrying that tenant's few-shot examples."""
    if few is None:
        arrival.add_arrivals(loop, tr, n, rate, seed)
        return
    rnd = random.Random(seed)
    tenants = random.Random(f"tenants/{seed}")  # apart, so the query mix is as-written's
    names = sorted(tr)
    t = 0.0
    for i in range(n):
        t += rnd.expovariate(rate)
        name = rnd.choice(names)
        tenant = tenants.randrange(TENANTS)
        loop.add_query(t, f"q{i}", name, arrival.replay(few.trace(tenant, name)))


def run_virtual(
    tr: dict[str, list[Step]],
    few: FewShot | None,
    *,
    n: int,
    rate: float,
    replicas: int,
    placement: str,
    seed: int,
    profile: str = PROFILE,
) -> dict[str, float]:
    loop = ReplicaLoop(replicas=replicas, placement=placement, profile=profile)
    add_arrivals(loop, tr, few, n, rate, seed)
    end = loop.run()
    # the same arrivals every run: the KV of their distinct prefixes, and of the whole pool
    kv = float(few.prefix_tokens()) if few is not None else 0.0
    pool = float(few.pool_prefix_tokens()) if few is not None else 0.0
    return {
        **arrival.summary(loop, end),
        "hit_rate": loop.cached / max(1, loop.queried),
        "prefix_kv_tokens": kv,
        "pool_kv_tokens": pool,
    }


def virtual_sweep(
    tr: dict[str, list[Step]], few: FewShot, args: argparse.Namespace
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for workload in args.workloads:
        shots = few if workload == "few-shot" else None
        for replicas in args.replicas:
            # offered load relative to this N's least-loaded capacity (all queries at once)
            mu = run_virtual(tr, shots, n=args.queries, rate=1e6, replicas=replicas,
                             placement="least-loaded", seed=args.seed,
                             profile=args.profile)["throughput"]  # fmt: skip
            for load in args.loads:
                for placement in PLACEMENTS if replicas > 1 else PLACEMENTS[:1]:
                    started = time.perf_counter()
                    res = run_virtual(tr, shots, n=args.queries, rate=load * mu,
                                      replicas=replicas, placement=placement, seed=args.seed,
                                      profile=args.profile)  # fmt: skip
                    rows.append({"workload": workload, "replicas": replicas,
                                 "placement": placement, "load": load,
                                 "rate_qps": round(load * mu, 4),
                                 **{k: round(v, 4) for k, v in res.items()}})  # fmt: skip
                    print(f"{workload} N={replicas} {placement:15s} load {load:.2f} P50 "
                          f"{res['p50']:7.2f}s P99 {res['p99']:7.2f}s thr "
                          f"{res['throughput']:.3f} q/s hit {res['hit_rate']:.3f} "
                          f"({time.perf_counter() - started:.1f}s)", flush=True)  # fmt: skip
    return rows


def capacity_at(
    rows: list[dict[str, Any]], workload: str, replicas: int, placement: str, slo: float
) -> float:
    mine = [r for r in rows if r["workload"] == workload and r["replicas"] == replicas]
    mine = [r for r in mine if replicas == 1 or r["placement"] == placement]
    return arrival.capacity_at([{**r, "strategy": "x"} for r in mine], "x", slo)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--queries", type=int, default=60, help="arrivals per load point")
    ap.add_argument("--replicas", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=WORKLOADS)
    ap.add_argument(
        "--loads",
        type=float,
        nargs="+",
        default=list(LOADS),
        help="offered loads, as fractions of each N's least-loaded capacity",
    )
    ap.add_argument("--report-from", nargs="+", metavar="CSV",
                    help="write the report from these runs' CSVs (virtual rows; <out>_real.csv "
                    "for the real-time rows) instead of running")  # fmt: skip
    ap.add_argument("--real-queries", type=int, default=8, help="0 skips the real-time part")
    ap.add_argument("--real-workload", default="few-shot", choices=WORKLOADS)
    ap.add_argument("--real-only", action="store_true",
                    help="only the real-time part, to <out>_real.csv (--report-from merges)")  # fmt: skip
    ap.add_argument("--time-scale", type=float, default=0.5)
    ap.add_argument("--profile", default=PROFILE, help="sim profile of each replica")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="replicas")
    args = ap.parse_args(argv)
    if args.report_from:
        rows, real = _replicas_report.read(args.report_from, args.out)
        args.workloads = [w for w in WORKLOADS if any(r["workload"] == w for r in rows)]
        _replicas_report.write(rows, real, args, capacity_at)
        plot(rows, args)
        return
    tr, few = traces()
    if args.real_only:
        import _replicas_real

        shots = few if args.real_workload == "few-shot" else None
        _replicas_report.save_real(_replicas_real.run_all(tr, shots, args), args.out)
        return
    rows = virtual_sweep(tr, few, args)
    real: list[dict[str, Any]] = []
    if args.real_queries:
        import _replicas_real

        real = _replicas_real.run_all(tr, few if args.real_workload == "few-shot" else None, args)
    _replicas_report.write(rows, real, args, capacity_at)
    plot(rows, args)


def plot(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    nw, nr = len(args.workloads), len(args.replicas)
    fig, axes = plt.subplots(nw, nr, figsize=(4 * nr, 3.5 * nw), squeeze=False)
    for wi, workload in enumerate(args.workloads):
        for ax, n in zip(axes[wi], args.replicas, strict=True):
            for placement in PLACEMENTS:
                mine = [r for r in rows if r["workload"] == workload and r["replicas"] == n
                        and r["placement"] == placement]  # fmt: skip
                if mine:
                    ax.plot([r["rate_qps"] for r in mine], [r["p50"] for r in mine], "o-",
                            label=f"{placement} P50")  # fmt: skip
                    ax.plot([r["rate_qps"] for r in mine], [r["p99"] for r in mine], "x--",
                            label=f"{placement} P99")  # fmt: skip
            ax.set_title(f"{workload}: {n} SIMULATED replica(s)", fontsize=9)
            ax.set_xlabel("offered load (queries/s)")
            ax.set_ylabel("latency (SIMULATED s)")
            ax.set_yscale("log")
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(RESULTS / f"{args.out}.png", dpi=110)


if __name__ == "__main__":
    main()
