"""``sem_topk`` ranking methods side by side: NDCG@10 and calls on labelled Debian packages.

Information, not a gate. Each query ranks a pool of package descriptions (a seeded sample from
the committed ``benchmarks/data/debian_packages.csv``, see :mod:`quality_data`: none of it tuned
a prompt) by one criterion ("Is this software package a game?"); a package is relevant when its
debtags category is the criterion's (binary relevance). Every method runs the same SQL, through
``connect()``, the engine, the scheduler and a fresh cache per method (so no method reads
another's answers):

    SELECT package, sem_rank FROM sem_topk('pool', 10, '<criterion> {description}',
                                           method := '<method>')

and we report mean NDCG@10 over the queries, the mean LLM calls (virtual, as ``con.stats()``
counts them), the bound the method promises (:func:`duckdb_sem.runtime.ranking.call_bound`),
``rank_fallbacks`` and the wall time. A random order's NDCG@10 is given as the floor.

    python benchmarks/bench_rerank.py                         # embedded llama:, ~15 min, 2 busy cores
    python benchmarks/bench_rerank.py --backend test: --pools 1   # smoke, seconds

The defaults are small (2 pools of 12, descriptions cut to 120 characters) because the
embedded models take seconds a call on a shared 2-core machine; ``--pools 8 --pool-size 20
--max-chars 400`` is the fuller run. The report is rewritten after every query, so a run
stopped early still leaves what it measured. Results: ``benchmarks/results/rerank.md``.
"""

from __future__ import annotations

import argparse
import math
import random
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import quality_data
from _results import RESULTS, write_report

import duckdb_sem
from duckdb_sem.runtime.ranking import call_bound

METHODS = ("pointwise", "pairwise", "listwise")
CRITERIA = {
    "game": "Is this software package a game? {description}",
    "science": "Is this software package for scientific work? {description}",
    "networking": "Is this software package about computer networking? {description}",
    "programming": "Is this software package a tool for programmers? {description}",
}
K = 10


@dataclass(frozen=True, slots=True)
class Query:
    category: str
    pool: tuple[quality_data.Package, ...]  # in the seeded order the ranking reads them


@dataclass(frozen=True, slots=True)
class Run:
    method: str
    query: Query
    ndcg: float
    calls: int
    physical: int
    fallbacks: int
    bound: int
    seconds: float


def queries(pools: int, size: int, relevant: int, seed: int) -> list[Query]:
    """``pools`` pools of ``size`` packages, the criteria in turn, ``relevant`` of each pool
    of its criterion's category."""
    packages = quality_data.debian()
    rng = random.Random(seed)
    out = []
    for i in range(pools):
        category = list(CRITERIA)[i % len(CRITERIA)]
        mine = [p for p in packages if p.category == category]
        others = [p for p in packages if p.category != category]
        pool = rng.sample(mine, relevant) + rng.sample(others, size - relevant)
        rng.shuffle(pool)
        out.append(Query(category, tuple(pool)))
    return out


def ndcg(ranked: Sequence[bool], total_relevant: int, k: int = K) -> float:
    """NDCG@k of a ranking given as relevance flags, binary gains."""
    dcg = sum(1 / math.log2(i + 2) for i, rel in enumerate(ranked[:k]) if rel)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(k, total_relevant)))
    return dcg / ideal if ideal else 0.0


def run(method: str, query: Query, backend: str, cache: Path, max_chars: int) -> Run:
    con = duckdb_sem.connect(backend=backend, cache=str(cache))
    try:
        pool = pd.DataFrame(
            {"package": [p.name for p in query.pool],
             "description": [p.description[:max_chars] for p in query.pool]}
        )  # fmt: skip
        con.duckdb.register("pool_df", pool)
        con.execute("CREATE TABLE pool AS SELECT * FROM pool_df")
        template = CRITERIA[query.category].replace("'", "''")
        started = time.perf_counter()
        rows = con.sql(
            f"SELECT package FROM sem_topk('pool', {K}, '{template}', method := '{method}') "
            "ORDER BY sem_rank"
        ).fetchall()
        seconds = time.perf_counter() - started
        stats = con.stats()
    finally:
        con.close()
    category = {p.name: p.category for p in query.pool}
    flags = [category[r[0]] == query.category for r in rows]
    relevant = sum(p.category == query.category for p in query.pool)
    return Run(method, query, ndcg(flags, relevant), stats.llm_calls, stats.physical_calls,
               stats.rank_fallbacks, call_bound(method, len(query.pool), K), seconds)  # fmt: skip


def random_floor(qs: Sequence[Query], seed: int, draws: int = 200) -> float:
    rng = random.Random(seed)
    total = 0.0
    for q in qs:
        flags = [p.category == q.category for p in q.pool]
        for _ in range(draws):
            total += ndcg(rng.sample(flags, len(flags)), sum(flags))
    return total / (len(qs) * draws)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", default="llama:?threads={threads}")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--pools", type=int, default=2, help="queries, the criteria in turn")
    parser.add_argument("--pool-size", type=int, default=12)
    parser.add_argument("--relevant", type=int, default=4, help="relevant packages per pool")
    parser.add_argument("--max-chars", type=int, default=120, help="description characters")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--note", default="", help="a line on the conditions of the run")
    parser.add_argument("--out", type=Path, default=RESULTS / "rerank.md")
    args = parser.parse_args()

    backend = args.backend.format(threads=args.threads)
    qs = queries(args.pools, args.pool_size, args.relevant, args.seed)
    methods = args.methods.split(",")
    runs: list[Run] = []
    with tempfile.TemporaryDirectory() as tmp:
        for method in methods:
            for q in qs:
                r = run(method, q, backend, Path(tmp) / f"{method}.sqlite", args.max_chars)
                runs.append(r)
                print(f"{method:9} {q.category:11} ndcg@10 {r.ndcg:.3f} calls {r.calls:3} "
                      f"(bound {r.bound}) fallbacks {r.fallbacks} {r.seconds:6.1f} s",
                      flush=True)  # fmt: skip
                report(args, backend, qs, runs)


def report(args: argparse.Namespace, backend: str, qs: Sequence[Query], runs: list[Run]) -> None:
    methods = list(dict.fromkeys(r.method for r in runs))
    lines = [
        "# sem_topk: pointwise, pairwise and listwise ranking",
        "",
        f"Backend `{backend}`. {len(qs)} queries (the criteria of the Debian categories in "
        f"turn), each a pool of {args.pool_size} package descriptions (first {args.max_chars} "
        f"characters) of which {args.relevant} are of the criterion's category (binary "
        f"relevance), seed {args.seed}; top {K} by `sem_topk(..., method := ...)`. Calls: "
        "virtual LLM calls per query (`con.stats().llm_calls`); bound: what the method "
        "promises for the pool. A fresh cache per method.",
        *(["", args.note] if args.note else []),
        "",
        "| method | mean NDCG@10 | min / max | calls per query | bound | fallbacks | s per query |",
        "|---|---|---|---|---|---|---|",
    ]
    for method in methods:
        mine = [r for r in runs if r.method == method]
        scores = [r.ndcg for r in mine]
        lines.append(
            f"| {method} | {sum(scores) / len(mine):.3f} | {min(scores):.3f} / "
            f"{max(scores):.3f} | {sum(r.calls for r in mine) / len(mine):.1f} | "
            f"{max(r.bound for r in mine)} | {sum(r.fallbacks for r in mine)} | "
            f"{sum(r.seconds for r in mine) / len(mine):.1f} |"
        )
    lines += [
        f"| random order | {random_floor(qs, args.seed):.3f} | | 0 | | | |",
        "",
        "Per query:",
        "",
        "| method | criterion | NDCG@10 | calls | physical | fallbacks | s |",
        "|---|---|---|---|---|---|---|",
        *(
            f"| {r.method} | {r.query.category} | {r.ndcg:.3f} | {r.calls} | {r.physical} | "
            f"{r.fallbacks} | {r.seconds:.1f} |"
            for r in runs
        ),
    ]
    command = (
        f"python benchmarks/bench_rerank.py --backend '{args.backend}' --threads {args.threads} "
        f"--pools {args.pools} --pool-size {args.pool_size} --relevant {args.relevant} "
        f"--max-chars {args.max_chars} --methods {args.methods} --seed {args.seed}"
    )
    write_report(args.out, lines, command)


if __name__ == "__main__":
    main()
