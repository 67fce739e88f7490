"""Cross-query fusion with many tenants (SIMULATED GPU time).

Closed loop: T tenants (8 to 64) each issue a query, wait for it, think (exponential, mean
``--think`` s) and issue the next, for ``--horizon`` simulated seconds. Queries overlap as
tenants' interests do: movies are drawn from a Zipf law over the bundled Rotten Tomatoes data,
so the same operators run over overlapping row sets, and filter-then-summarise queries share
whole identical subplans. Same discrete-event driver as ``bench_scheduler.py`` (the real
Scheduler on the sim cost model, two replicas); every number is SIMULATED.

Variants: ``fcfs`` without fusion (baseline), ``fcfs+fusion`` (fusion alone),
``joint+fusion`` (HeraSys: fusion and joint scheduling), ``joint+fusion+cache`` (also reusing
finished answers from the persistent cache). Unique work = distinct request signatures asked
during the run: the least physical work any system could do.

    python benchmarks/bench_fusion.py
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_scheduler import (
    FILTER,
    JOIN,
    RESULTS,
    SUMMARY,
    Data,
    EventLoop,
    Query,
    _chunks,
    _cost,
    _labelled,
    _req,
    write_results,
)

from duckdb_sem.cache.store import LLMCache
from duckdb_sem.llm.request import OperatorKind
from duckdb_sem.scheduler.policies import make_policy

VARIANTS: dict[str, tuple[str, bool, bool]] = {  # label -> (policy, fusion, cache)
    "fcfs": ("fcfs", False, False),
    "fcfs+fusion": ("fcfs", True, False),
    "joint+fusion": ("joint", True, False),
    "joint+fusion+cache": ("joint", True, True),
}


def zipf_movies(d: Data, rnd: random.Random, k: int, s: float = 1.1) -> list[str]:
    weights = [1.0 / (i + 1) ** s for i in range(len(d.movies))]
    chosen: list[str] = []
    while len(chosen) < k:
        m = rnd.choices(d.movies, weights)[0]
        if m not in chosen:
            chosen.append(m)
    return sorted(chosen)


def tenant_query(d: Data, rnd: random.Random) -> tuple[str, Query]:
    u = rnd.random()
    if u < 0.4:  # filter over a few popular movies' reviews
        rows = [r for m in zipf_movies(d, rnd, rnd.randint(2, 6)) for r in d.reviews[m]]
        reqs = [_labelled(OperatorKind.FILTER, FILTER.format(t), ok) for t, ok in rows]
        return "filter", _chunks(reqs, 0.0)
    if u < 0.8:  # filter, then summarise the positive ones: a whole shared subplan

        def gen() -> Query:
            rows = [r for m in zipf_movies(d, rnd, rnd.randint(4, 10)) for r in d.reviews[m]]
            filt = [_labelled(OperatorKind.FILTER, FILTER.format(t), ok) for t, ok in rows]
            later = _cost([_req(OperatorKind.MAP, SUMMARY.format(t), 48) for t, _ in rows], 24) / 2
            yield from _chunks(filt, later)
            maps = [
                _labelled(OperatorKind.MAP, SUMMARY.format(t), None, 48) for t, ok in rows if ok
            ]
            yield from _chunks(maps, 0.0)

        return "filter+map", gen()
    chosen = zipf_movies(d, rnd, rnd.randint(3, 6))  # reviews x plots
    pairs = [(t, m, p) for m in chosen for t, _ in d.reviews[m] for p in chosen]
    join = [_labelled(OperatorKind.JOIN, JOIN.format(t, d.plots[p]), m == p) for t, m, p in pairs]
    return "join", _chunks(join, 0.0)


def run(variant: str, tenants: int, args: argparse.Namespace, data: Data) -> dict[str, Any]:
    policy, fusion, use_cache = VARIANTS[variant]
    with tempfile.TemporaryDirectory() as tmp:
        cache = LLMCache(Path(tmp) / "c.sqlite") if use_cache else None
        opts: dict[str, float] = {"aging_rate": 2000.0} if policy == "joint" else {}
        loop = EventLoop(make_policy(policy, **opts), fusion=fusion, cache=cache)
        rnd = random.Random(args.seed * 1000 + tenants)
        asked: set[str] = set()
        counter = iter(range(10**9))
        finished_at: list[float] = []

        def issue(t: float, tenant: int) -> None:
            kind, query = tenant_query(data, rnd)
            qid = f"t{tenant}-q{next(counter)}"
            owner[qid] = tenant
            loop.add_query(t, qid, kind, _recording(query))

        def _recording(query: Query) -> Query:
            for reqs, cost in query:
                asked.update(r.signature(loop.scheduler.backend_id) for r in reqs)
                yield reqs, cost

        owner: dict[str, int] = {}

        def on_done(qid: str, kind: str) -> None:
            finished_at.append(loop.now)
            next_t = loop.now + rnd.expovariate(1.0 / args.think)
            if next_t < args.horizon:
                issue(next_t, owner[qid])

        loop.on_done = on_done
        for tenant in range(tenants):
            issue(rnd.uniform(0, args.think), tenant)
        end = loop.run()
        if cache is not None:
            cache.close()
    lat = sorted(loop.latencies["all"])
    u = loop.scheduler.usage
    return {
        "tenants": tenants,
        "variant": variant,
        "queries": len(lat),
        "throughput_qps": round(len(lat) / end, 3),
        "p50_s": round(statistics.median(lat), 2),
        "p99_s": round(lat[min(len(lat) - 1, math.ceil(0.99 * len(lat)) - 1)], 2),
        "virtual_calls": u.virtual_calls,
        "physical_calls": u.physical_calls,
        "unique_work": len(asked),
        "fused_calls": u.fused_calls,
        "cache_calls": u.cache_calls,
        "physical_over_unique": round(u.physical_calls / max(1, len(asked)), 2),
    }


def plot(rows: list[dict[str, Any]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for variant in VARIANTS:
        mine = [r for r in rows if r["variant"] == variant]
        x = [r["tenants"] for r in mine]
        axes[0].plot(x, [r["throughput_qps"] for r in mine], marker="o", label=variant)
        axes[1].plot(x, [r["p99_s"] for r in mine], marker="o", label=variant)
        axes[2].plot(x, [r["physical_over_unique"] for r in mine], marker="o", label=variant)
    for ax, title in zip(
        axes,
        ("throughput (queries/s)", "P99 latency (s)", "physical calls / unique work"),
        strict=True,
    ):
        ax.set_title(f"{title} - SIMULATED")
        ax.set_xlabel("tenants (closed loop)")
        ax.set_xscale("log", base=2)
        ax.grid(alpha=0.3)
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(RESULTS / "fusion.png", dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tenants", type=int, nargs="+", default=[8, 16, 32, 64])
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS))
    ap.add_argument("--think", type=float, default=5.0, help="mean think time (s)")
    ap.add_argument("--horizon", type=float, default=60.0, help="simulated seconds of arrivals")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--profile", default="default")
    ap.add_argument("--replicas", type=int, default=2)
    args = ap.parse_args()
    data = Data.load()
    rows = []
    for tenants in args.tenants:
        for variant in args.variants:
            started = time.perf_counter()
            row = run(variant, tenants, args, data)
            rows.append(row)
            print({**row, "wall_s": round(time.perf_counter() - started, 1)}, flush=True)
    write_results("fusion", rows, args)
    plot(rows)


if __name__ == "__main__":
    main()
