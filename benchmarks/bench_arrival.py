"""Benchmark (information, SIMULATED): continuous arrival, adaptive plans against fixed plans.

SeqoFlow's experiment 1: queries of the set (``workloads/queries.py``, Q0 to Q8 over four
datasets) arrive as a Poisson process; every strategy runs under the same SRTF+aging scheduler
on two SIMULATED Qwen3-32B replicas (8x A100 TP=8 each, or ``--profile h200``). Strategies:

- ``adaptive``: the SEU loop re-choosing the plan per batch from a SIMULATED Qwen3-4B
  estimator's samples (its time is in the trace, as waiting between SEUs);
- ``static-1`` / ``static-2``: the plans of the two hand-written SQL orders of each query;
- ``static-best*``: per query, the candidate plan fastest in hindsight (oracle baseline).

Trace-driven: each (query, strategy) runs once through the real runtime on the SIMULATED
backend (``workloads/runner.py``), recording the SEUs it sent to the scheduler; the arrival
sweep replays those SEUs through the real :class:`Scheduler` inside ``bench_scheduler``'s
discrete-event GPU loop, with each query's true remaining cost for SRTF. Writes
``results/arrival.{csv,md,png}``.

    python benchmarks/bench_arrival.py [--queries 150 --loads 0.3 0.6 0.8 0.9 1.0 1.2]
"""

from __future__ import annotations

import argparse
import csv
import math
import random
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_scheduler as sched_bench
from _results import RESULTS
from workloads.queries import QUERIES, Query
from workloads.runner import Outcome, Step, run_query, written_plan

from duckdb_sem.llm.request import Completion, LLMRequest
from duckdb_sem.scheduler.seu import SEU

STRATEGIES = ("adaptive", "static-1", "static-2", "static-best*")
POLICY = "srtf+aging"
_DELAY = object()


def collect(queries: list[Query], *, max_plans: int) -> dict[tuple[str, str], Outcome]:
    """One traced run per (query, strategy); static-best* is the fastest candidate plan."""
    out: dict[tuple[str, str], Outcome] = {}
    for q in queries:
        adaptive = run_query(q, "adaptive")
        out[(q.name, "adaptive")] = adaptive
        out[(q.name, "static-1")] = run_query(q, "static", plan=written_plan(q, q.sql))
        out[(q.name, "static-2")] = run_query(q, "static", plan=written_plan(q, q.alt))
        runs = [out[(q.name, "static-1")], out[(q.name, "static-2")]]
        runs += [run_query(q, "static", plan=p) for p in adaptive.plans[:max_plans]]
        out[(q.name, "static-best*")] = min(runs, key=lambda o: o.seconds)
        print(
            f"{q.name}: "
            + ", ".join(
                f"{s} {out[(q.name, s)].seconds + out[(q.name, s)].estimator_seconds:.2f}s"
                for s in STRATEGIES
            )
            + f" ({len(adaptive.plans)} candidate plans)",
            flush=True,
        )
    return out


# -- replay ------------------------------------------------------------------------------------

ANSWERS: dict[tuple[str, str], Completion] = {}


def _answer(r: LLMRequest) -> Completion:
    return ANSWERS[(r.prefix, r.row)]


def _cost(step: Step) -> float:
    return float(sum(c.prompt_tokens + 8 * c.completion_tokens for c in step.completions))


def replay(trace: list[Step]) -> Iterator[Any]:
    costs = [_cost(s) for s in trace]
    for i, step in enumerate(trace):
        if step.delay:
            yield _DELAY, step.delay
        elif step.requests:
            yield list(step.requests), sum(costs[i:])


class ArrivalLoop(sched_bench.EventLoop):
    """bench_scheduler's loop, plus estimator time between SEUs (no GPU used)."""

    def _next_seu(self, qid: str, kind: str, query: Any, arrived: float) -> None:
        step = next(query, None)
        if step is not None and step[0] is _DELAY:
            self.at(self.now + step[1], "seu", (qid, kind, query, arrived))
            return
        if step is None:
            sched_bench.EventLoop._next_seu(self, qid, kind, iter(()), arrived)
            return
        reqs, remaining = step
        future = self.scheduler.submit(SEU(qid, kind, tuple(reqs), remaining, "bench"))
        future.add_done_callback(lambda _f: self.at(self.now, "seu", (qid, kind, query, arrived)))


def run_load(
    traces: dict[str, list[Step]], n: int, rate: float, seed: int, profile: str
) -> dict[str, float]:
    loop = ArrivalLoop(sched_bench.build_policy(POLICY), profile=profile, replicas=2,
                       fusion=False)  # fmt: skip
    add_arrivals(loop, traces, n, rate, seed)
    return summary(loop, loop.run())


def add_arrivals(
    loop: ArrivalLoop, traces: dict[str, list[Step]], n: int, rate: float, seed: int
) -> None:
    """``n`` queries arriving as a Poisson process of ``rate``, each a seeded pick of a trace."""
    rnd = random.Random(seed)
    names = sorted(traces)
    t = 0.0
    for i in range(n):
        t += rnd.expovariate(rate)
        name = rnd.choice(names)
        loop.add_query(t, f"q{i}", name, replay(traces[name]))


def summary(loop: ArrivalLoop, end: float) -> dict[str, float]:
    """P50, P99, throughput and GPU utilisation of a finished run that ended at ``end``."""
    lat = sorted(loop.latencies["all"])
    return {
        "p50": statistics.median(lat),
        "p99": lat[min(len(lat) - 1, math.ceil(0.99 * len(lat)) - 1)],
        "throughput": len(lat) / end,
        "gpu_util": sum(g.busy_s for g in loop.gpus) / (len(loop.gpus) * end),
    }


def capacity_at(rows: list[dict[str, Any]], strategy: str, slo: float) -> float:
    """Highest offered rate whose P50 stays within ``slo`` (linear between sweep points)."""
    mine = sorted((r for r in rows if r["strategy"] == strategy), key=lambda r: r["rate_qps"])
    best = 0.0
    for lo, hi in zip([None, *mine], mine, strict=False):
        if hi["p50"] <= slo:
            best = hi["rate_qps"]
        elif lo is not None and lo["p50"] <= slo:
            frac = (slo - lo["p50"]) / (hi["p50"] - lo["p50"])
            best = lo["rate_qps"] + frac * (hi["rate_qps"] - lo["rate_qps"])
            break
        else:
            break
    return best


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--queries", type=int, default=150, help="arrivals per load point")
    ap.add_argument("--loads", type=float, nargs="+", default=[0.3, 0.6, 0.8, 0.9, 1.0, 1.2])
    ap.add_argument("--only", nargs="*", help="query names (default: all)")
    ap.add_argument("--max-plans", type=int, default=8, help="candidates tried for static-best*")
    ap.add_argument("--profile", default="default", help="sim profile of each replica")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="arrival")
    args = ap.parse_args(argv)
    profile = "default" if args.profile in ("default", "a100x8") else args.profile
    queries = [q for q in QUERIES if not args.only or q.name in args.only]
    outcomes = collect(queries, max_plans=args.max_plans)
    for o in outcomes.values():
        for step in o.trace:
            for r, c in zip(step.requests, step.completions, strict=True):
                ANSWERS[(r.prefix, r.row)] = c
    sched_bench._answer = _answer  # the loop asks this module-level hook for every answer
    single = [o.row() | {"mode": s} for (_, s), o in sorted(outcomes.items())]
    by_strategy = {s: {q.name: outcomes[(q.name, s)].trace for q in queries} for s in STRATEGIES}
    # Offered load as a fraction of Static-1's capacity (all queries arriving at once).
    mu = run_load(by_strategy["static-1"], args.queries, 1e6, args.seed, profile)["throughput"]
    print(f"SIMULATED Static-1 capacity: {mu:.3f} queries/s", flush=True)
    rows: list[dict[str, Any]] = []
    for load in args.loads:
        for s in STRATEGIES:
            started = time.perf_counter()
            res = run_load(by_strategy[s], args.queries, load * mu, args.seed, profile)
            rows.append({"load": load, "rate_qps": round(load * mu, 4), "strategy": s,
                         **{k: round(v, 3) for k, v in res.items()}})  # fmt: skip
            print(f"load {load:4.2f} {s:13s} P50 {res['p50']:7.2f}s P99 {res['p99']:7.2f}s "
                  f"thr {res['throughput']:.3f} q/s ({time.perf_counter() - started:.1f}s)",
                  flush=True)  # fmt: skip
    write(rows, single, args)


def write(rows: list[dict[str, Any]], single: list[dict[str, Any]], args: Any) -> None:
    RESULTS.mkdir(exist_ok=True)
    with open(RESULTS / f"{args.out}.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    base = min(r["p50"] for r in rows if r["strategy"] == "adaptive")
    slos = [round(base * k, 2) for k in (2, 4, 8)]
    lines = [
        f"# Continuous arrival (SIMULATED: 2 replicas, profile {args.profile}, {POLICY})",
        "",
        f"Command: `{' '.join(['python benchmarks/bench_arrival.py', *sys.argv[1:]])}`",
        "",
        "| load | rate (q/s) | strategy | P50 (s) | P99 (s) | throughput (q/s) | GPU util |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['load']} | {r['rate_qps']} | {r['strategy']} | {r['p50']} | {r['p99']} | "
        f"{r['throughput']} | {r['gpu_util']} |"
        for r in rows
    ]
    lines += [
        "",
        "Sustainable offered load at equal P50 (highest rate with P50 within the SLO):",
        "",
        "| P50 SLO (s) | " + " | ".join(STRATEGIES) + " | adaptive / static-1 | "
        "adaptive / static-2 | adaptive / static-best* |",
        "|---" * 8 + "|",
    ]
    for slo in slos:
        cap = {s: capacity_at(rows, s, slo) for s in STRATEGIES}

        def ratio(s: str, cap: dict[str, float] = cap) -> str:
            return f"{cap['adaptive'] / cap[s]:.2f}x" if cap[s] else "n/a"

        lines.append(f"| {slo} | " + " | ".join(f"{cap[s]:.3f}" for s in STRATEGIES)
                     + f" | {ratio('static-1')} | {ratio('static-2')} | {ratio('static-best*')} |")  # fmt: skip
    lines += [
        "",
        "Single query on an idle deployment (SIMULATED seconds, one replica):",
        "",
        "| query | strategy | SIMULATED s | estimator s | LLM calls | prompt tokens | F1 |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['query']} | {r['mode']} | {r['sim_seconds']} | {r['estimator_s']} | "
        f"{r['llm_calls']} | {r['prompt_tokens']} | {r['f1']} |"
        for r in single
    ]
    (RESULTS / f"{args.out}.md").write_text("\n".join(lines) + "\n")
    plot(rows, args.out)


def plot(rows: list[dict[str, Any]], out: str) -> None:
    sched_bench.plot_latency(rows, "strategy", list(STRATEGIES), "rate_qps",
                             "offered load (queries/s)", out)  # fmt: skip


if __name__ == "__main__":
    main()
