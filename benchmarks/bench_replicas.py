"""Benchmark (information, SIMULATED): N replicas, least-loaded against cache-aware placement.

SeqoFlow-style continuous arrival (``bench_arrival``'s Static-1 traces of the query set) on 1,
2, 4 and 8 SIMULATED Qwen3-32B/H200 replicas whose prefix caches share each replica's KV budget
with LRU eviction (``backends/sim/cost_model.py``). Two parts, both through the real
:class:`~duckdb_sem.scheduler.core.Scheduler`:

- **virtual clock** (no real sleeping, so not disturbed by a busy CPU): ``bench_scheduler``'s
  discrete-event loop sweeps offered load per replica count, for the scheduler's placements
  ``least-loaded`` and ``prefix-affinity``. Reports throughput at equal P50 (the highest
  offered rate whose P50 stays within one SLO for every N), P99, prefix hit rate, and scaling
  efficiency per replica (capacity at N / (N x capacity at 1)), all ratios of one run.
- **real time** (short): N ``duckdb-sem sim-server`` processes (``--time-scale``), and a burst of
  queries replayed through the scheduler with N ``openai:`` backends (least-loaded,
  prefix-affinity) or one ``openai:`` backend pointing at ``vllm-router --policy cache_aware``
  started in front of the N servers, as a user would run it. Reports makespan, P50/P99 and the
  servers' own prefix hit rate (``vllm:prefix_cache_hits/queries`` from their ``/metrics``).

Writes ``results/replicas.{csv,md,png}``. Every figure is SIMULATED; real-time ones are marked.

    python benchmarks/bench_replicas.py [--queries 60 --replicas 1 2 4 8 --real-queries 8]
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_arrival as arrival
import bench_scheduler as sched_bench
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


def traces() -> dict[str, list[Step]]:
    """Static-1 traces of every query (the plan of its SQL as written), answers recorded."""
    out = {}
    for q in QUERIES:
        outcome = run_query(q, "static", plan=written_plan(q, q.sql))
        out[q.name] = outcome.trace
        for step in outcome.trace:
            for r, c in zip(step.requests, step.completions, strict=True):
                arrival.ANSWERS[(r.prefix, r.row)] = c
    sched_bench._answer = arrival._answer  # the loop asks this module-level hook for answers
    return out


def run_virtual(
    tr: dict[str, list[Step]],
    *,
    n: int,
    rate: float,
    replicas: int,
    placement: str,
    seed: int,
    profile: str = PROFILE,
) -> dict[str, float]:
    loop = ReplicaLoop(replicas=replicas, placement=placement, profile=profile)
    arrival.add_arrivals(loop, tr, n, rate, seed)
    end = loop.run()
    return {**arrival.summary(loop, end), "hit_rate": loop.cached / max(1, loop.queried)}


def virtual_sweep(tr: dict[str, list[Step]], args: argparse.Namespace) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for replicas in args.replicas:
        # offered load relative to this N's least-loaded capacity (all queries at once)
        mu = run_virtual(tr, n=args.queries, rate=1e6, replicas=replicas,
                         placement="least-loaded", seed=args.seed,
                         profile=args.profile)["throughput"]  # fmt: skip
        for load in LOADS:
            for placement in PLACEMENTS if replicas > 1 else PLACEMENTS[:1]:
                started = time.perf_counter()
                res = run_virtual(tr, n=args.queries, rate=load * mu, replicas=replicas,
                                  placement=placement, seed=args.seed,
                                  profile=args.profile)  # fmt: skip
                rows.append({"replicas": replicas, "placement": placement, "load": load,
                             "rate_qps": round(load * mu, 4),
                             **{k: round(v, 4) for k, v in res.items()}})  # fmt: skip
                print(f"N={replicas} {placement:15s} load {load:.2f} P50 {res['p50']:7.2f}s "
                      f"P99 {res['p99']:7.2f}s thr {res['throughput']:.3f} q/s hit "
                      f"{res['hit_rate']:.3f} ({time.perf_counter() - started:.1f}s)",
                      flush=True)  # fmt: skip
    return rows


def capacity_at(rows: list[dict[str, Any]], replicas: int, placement: str, slo: float) -> float:
    mine = [r for r in rows if r["replicas"] == replicas and r["placement"] == placement]
    if replicas == 1:
        mine = [r for r in rows if r["replicas"] == 1]
    return arrival.capacity_at([{**r, "strategy": "x"} for r in mine], "x", slo)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--queries", type=int, default=60, help="arrivals per load point")
    ap.add_argument("--replicas", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--real-queries", type=int, default=8, help="0 skips the real-time part")
    ap.add_argument("--time-scale", type=float, default=0.5)
    ap.add_argument("--profile", default=PROFILE, help="sim profile of each replica")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="replicas")
    args = ap.parse_args(argv)
    tr = traces()
    rows = virtual_sweep(tr, args)
    real: list[dict[str, Any]] = []
    if args.real_queries:
        import _replicas_real

        real = _replicas_real.run_all(tr, args)
    write(rows, real, args)


def write(rows: list[dict[str, Any]], real: list[dict[str, Any]], args: argparse.Namespace) -> None:
    RESULTS.mkdir(exist_ok=True)
    with open(RESULTS / f"{args.out}.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    base = min(r["p50"] for r in rows if r["replicas"] == min(args.replicas))
    slos = [round(base * k, 2) for k in (2, 4)]
    cmd = " ".join(["python benchmarks/bench_replicas.py", *sys.argv[1:]])
    lines = [
        f"# N replicas: least-loaded against prefix-affinity and vllm-router (SIMULATED, {args.profile})",
        "",
        f"Command: `{cmd}`. SIMULATED throughout: a vLLM-like cost model, not a GPU. Virtual-clock "
        f"figures are exact for the model; the real-time table ran on a shared 2-core machine "
        f"(machine shared, not a timing).",
        "",
        f"## Virtual clock: {args.queries} Poisson arrivals per point, policy {arrival.POLICY}",
        "",
        "| replicas | placement | load | rate (q/s) | P50 (s) | P99 (s) | throughput (q/s) | "
        "prefix hit rate | GPU util |",
        "|---" * 9 + "|",
    ]
    lines += [
        f"| {r['replicas']} | {r['placement']} | {r['load']} | {r['rate_qps']} | {r['p50']} | "
        f"{r['p99']} | {r['throughput']} | {r['hit_rate']} | {r['gpu_util']} |"
        for r in rows
    ]
    lines += [
        "",
        "Throughput at equal P50 (highest offered rate whose P50 is within the SLO) and scaling "
        "efficiency per replica (capacity at N / (N x capacity at 1 replica)):",
        "",
        "| P50 SLO (s) | replicas | least-loaded (q/s) | prefix-affinity (q/s) | "
        "affinity / least-loaded | efficiency least-loaded | efficiency prefix-affinity |",
        "|---" * 7 + "|",
    ]
    for slo in slos:
        one = capacity_at(rows, 1, "least-loaded", slo) if 1 in args.replicas else 0.0
        for n in args.replicas:
            ll = capacity_at(rows, n, "least-loaded", slo)
            pa = capacity_at(rows, n, "prefix-affinity", slo)
            top = max(r["rate_qps"] for r in rows if r["replicas"] == n)
            mark = ["≥" if c >= top else "" for c in (ll, pa)]  # the SLO held at every point
            ratio = f"{pa / ll:.2f}x" if ll else "n/a"
            eff = [
                f"{m}{c / (n * one):.2f}" if one else "n/a"
                for m, c in zip(mark, (ll, pa), strict=True)
            ]
            lines.append(f"| {slo} | {n} | {mark[0]}{ll:.3f} | {mark[1]}{pa:.3f} | {ratio} | "
                         f"{eff[0]} | {eff[1]} |")  # fmt: skip
    lines += ["", "≥: P50 stayed within the SLO at every offered load of the sweep (censored)."]
    if real:
        lines += [
            "",
            f"## Real time (machine shared, not a timing): {args.real_queries} queries at once, "
            f"sim servers at time_scale {args.time_scale}",
            "",
            "| replicas | placement | makespan (s) | throughput (q/s) | P50 (s) | P99 (s) | "
            "prefix hit rate (servers' /metrics) |",
            "|---" * 7 + "|",
        ]
        lines += [
            f"| {r['replicas']} | {r['placement']} | {r['makespan']} | {r['throughput']} | "
            f"{r['p50']} | {r['p99']} | {r['hit_rate']} |"
            for r in real
        ]
    (RESULTS / f"{args.out}.md").write_text("\n".join(lines) + "\n")
    plot(rows, args)


def plot(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(args.replicas), figsize=(4 * len(args.replicas), 3.5))
    for ax, n in zip(list(axes) if len(args.replicas) > 1 else [axes], args.replicas, strict=True):
        for placement in PLACEMENTS:
            mine = [r for r in rows if r["replicas"] == n and r["placement"] == placement]
            if mine:
                ax.plot([r["rate_qps"] for r in mine], [r["p50"] for r in mine], "o-",
                        label=f"{placement} P50")  # fmt: skip
                ax.plot([r["rate_qps"] for r in mine], [r["p99"] for r in mine], "x--",
                        label=f"{placement} P99")  # fmt: skip
        ax.set_title(f"{n} SIMULATED replica(s), {args.profile}")
        ax.set_xlabel("offered load (queries/s)")
        ax.set_ylabel("latency (SIMULATED s)")
        ax.set_yscale("log")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(RESULTS / f"{args.out}.png", dpi=110)


if __name__ == "__main__":
    main()
