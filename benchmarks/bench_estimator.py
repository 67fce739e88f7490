"""Benchmark (information, not a gate; SIMULATED): estimation accuracy and overhead.

Measured as SeqoFlow does, on the labelled workload of ``_dynamism_data`` (real Rotten
Tomatoes labels; 0%, 30% and 70% of batches with flipped cost and selectivity):

- per batch, the estimated against the actual cost (token-equivalents) of the SEU; the share
  of batches within 10%;
- the share of batches whose chosen plan is one of the two truly cheapest on that batch (the
  truth: every candidate costed with the batch's exact statistics, from the labels);
- for a set of concurrent queries (7 filter combinations over tables of 5 to 20 batches), the
  share of query pairs the remaining-cost estimates order correctly at random SEU boundaries,
  and Spearman's rho (mean over 200 snapshots);
- the estimator's own (SIMULATED 4B) time as a share of each query's run time.

Writes ``results/estimator.md`` and ``results/estimator.png``.

    python benchmarks/bench_estimator.py [--batch-rows 256 100] [--batches 40] [--seeds 3]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import duckdb

sys.path.insert(0, str(Path(__file__).parent))

from _dynamism_data import A, B, C, LabelOracle, backends, build
from _results import RESULTS

import duckdb_sem
from duckdb_sem.backends.sim import SimBackend
from duckdb_sem.estimator import Profiler, pair_order_accuracy, spearman_rho, summarize
from duckdb_sem.estimator.remaining import llm_cost
from duckdb_sem.optimizer.choose import plan_key
from duckdb_sem.optimizer.cost import CostModel, operator_signature
from duckdb_sem.runtime import RuntimeOptions
from duckdb_sem.runtime.entry import prepare, start
from duckdb_sem.runtime.plan_sql import scan_sql

# each filter's yes-probability in (normal, flipped) batches: see _dynamism_data.build
PROBABILITY = {"positive review": (0.1, 0.9), "crime story": (0.9, 0.1), "in a city": (0.5, 0.5)}


def _probability(template: str, flipped: bool) -> float:
    for phrase, (normal, flip) in PROBABILITY.items():
        if phrase in template:
            return flip if flipped else normal
    raise KeyError(template)


def one_query(
    filters: list[str], ratio: float, batches: int, args: argparse.Namespace, seed: int = 0
) -> dict[str, Any]:
    probe = duckdb.connect()
    work = build(probe, flip_ratio=ratio, batches=batches, batch_rows=args.batch_rows, seed=seed)
    target, estimator = backends(work.labels)
    con = duckdb_sem.connect(backend=target, cache="off")
    build(con.duckdb, flip_ratio=ratio, batches=batches, batch_rows=args.batch_rows, seed=seed)
    where = " AND ".join(f"sem_filter('{f}')" for f in filters)
    sql = f"SELECT id FROM t WHERE {where}"
    options = RuntimeOptions(mode="adaptive", batch_rows=args.batch_rows, adapt_batch=False,
                             estimator=estimator, sample_rows=args.sample)  # fmt: skip
    raw = con.duckdb
    prepared = prepare(raw, sql, con.session.engine, options)
    run = start(raw, prepared, con.session.engine, con.session.new_query(), options)
    for _ in run.batches():
        pass
    loop: Any = run
    # hindsight: each batch's exact statistics (the labels, no noise, every row)
    truth = Profiler(target, SimBackend("default", oracle=LabelOracle(work.labels)),
                     sample_rows=args.batch_rows)  # fmt: skip
    rows = raw.sql(scan_sql(loop.driving)).to_arrow_table()
    top2, floor = [], []
    regions = {plan_key(r): r for r in loop._regions}
    templates = {operator_signature(c): c.template for c in loop.calls}
    for rec in loop.records:
        batch = rows.slice(rec.index * args.batch_rows, rec.rows)
        stats = truth.profile_batch(batch, loop.calls)
        model = CostModel(table_rows={"t": float(rec.rows)}, stats=stats)
        costs = sorted((llm_cost(model, r), plan_key(r)) for r in loop._regions)
        top2.append(rec.plan in {k for _, k in costs[:2]})
        # the floor: an estimator told each filter's true yes-probability on this kind of
        # batch (and the exact tokens) but not the answers of the batch's rows, which no
        # sample short of every row can know; its error is against the batch's realized
        # selectivities (same token counts on both sides)
        flip = rec.index in work.flipped
        told = {sig: replace(s, selectivity=_probability(templates[sig], flip))
                for sig, s in stats.items()}  # fmt: skip
        guess = llm_cost(
            CostModel(table_rows={"t": float(rec.rows)}, stats=told), regions[rec.plan]
        )
        realized = llm_cost(model, regions[rec.plan])
        floor.append(abs(guess - realized) <= 0.10 * realized)
    records = list(loop.records)
    actual_left, acc = [], 0.0
    for r in reversed(records):
        acc += r.actual_cost
        actual_left.append(acc)
    actual_left.reverse()
    total = target.virtual_seconds + estimator.virtual_seconds
    con.close()
    return {
        "overhead": estimator.virtual_seconds / total,
        "remaining": [(r.estimated_remaining, a) for r, a in zip(records, actual_left, strict=True)],
        "records": records, "top2s": top2, "floors": floor,
        "seconds": (estimator.virtual_seconds, total),
    }  # fmt: skip


def pooled(filters: list[str], ratio: float, args: argparse.Namespace) -> dict[str, Any]:
    """Every batch of ``args.seeds`` runs (tables drawn with different seeds), pooled."""
    runs = [one_query(filters, ratio, args.batches, args, seed=s) for s in range(args.seeds)]
    report = summarize([rec for r in runs for rec in r["records"]])  # as EXPLAIN ANALYZE does
    top2 = [t for r in runs for t in r["top2s"]]
    floor = [f for r in runs for f in r["floors"]]
    est = sum(r["seconds"][0] for r in runs)
    return {
        "batches": report.batches,
        "within": report.within_10pct,
        "floor": sum(floor) / len(floor),
        "median_error": report.median_error,
        "top2": sum(top2) / len(top2),
        "overhead": est / sum(r["seconds"][1] for r in runs),
        "errors": [rec.relative_error for rec in runs[0]["records"]],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch-rows", type=int, nargs="+", default=[256, 100],
                        help="SEU sizes (the first one also for the concurrent queries)")  # fmt: skip
    parser.add_argument("--batches", type=int, default=40, help="batches per query")
    parser.add_argument("--seeds", type=int, default=3, help="tables drawn per setting")
    parser.add_argument("--sample", type=int, default=16)
    args = parser.parse_args()
    sizes_rows = args.batch_rows
    RESULTS.mkdir(exist_ok=True)
    lines = [
        "# Estimator accuracy and overhead (SIMULATED)",
        "",
        "SIMULATED target (Qwen3-32B profile) answering from real labels; SIMULATED 4B estimator",
        f"wrong on 10% of its answers; {args.sample} sampled rows per operator when sampled "
        f"(only when in doubt). Per setting {args.seeds} tables x {args.batches} batches, pooled. "
        f"Command: `python benchmarks/bench_estimator.py "
        f"--batch-rows {' '.join(map(str, sizes_rows))} --batches {args.batches} --seeds {args.seeds}`.",
        "",
        "*Floor*: the share an estimator reaches when told each filter's true yes-probability for "
        "the kind of batch (normal or flipped) and the exact tokens, but not the answers of the "
        "batch's own rows: its misses are the binomial noise of a finite batch, which no sample "
        "short of every row removes.",
        "",
        "| SEU rows | flipped batches | batches | within 10% | floor | median error "
        "| on a top-2 plan | estimator share of run time |",
        "|---|---|---|---|---|---|---|---|",
    ]
    errors_by_ratio: dict[float, list[float]] = {}
    for rows in sizes_rows:
        args.batch_rows = rows
        for ratio in (0.0, 0.3, 0.7):
            r = pooled([A, B, C], ratio, args)
            if rows == sizes_rows[0]:
                errors_by_ratio[ratio] = r["errors"]
            lines.append(f"| {rows} | {ratio:.0%} | {r['batches']} | {r['within']:.1%} | "
                         f"{r['floor']:.1%} | {r['median_error']:.1%} | {r['top2']:.1%} | "
                         f"{r['overhead']:.1%} |")  # fmt: skip
            print(lines[-1], flush=True)
    args.batch_rows = sizes_rows[0]
    # concurrent queries: remaining-cost order
    combos = [[A], [B], [C], [A, B], [B, C], [A, C], [A, B, C]]
    sizes = [5, 8, 10, 12, 15, 18, 20]
    queries = [
        one_query(f, 0.3, n, args, seed=i)
        for i, (f, n) in enumerate(zip(combos, sizes, strict=True))
    ]
    rng = random.Random(0)
    pairs, rhos, start_est, start_act = [], [], [], []
    for _ in range(200):
        snap = [rng.choice(q["remaining"]) for q in queries]
        pairs.append(pair_order_accuracy([s[0] for s in snap], [s[1] for s in snap]))
        rhos.append(spearman_rho([s[0] for s in snap], [s[1] for s in snap]))
    for q in queries:
        start_est.append(q["remaining"][0][0])
        start_act.append(q["remaining"][0][1])
    overheads = sorted(q["overhead"] for q in queries)
    lines += [
        "",
        f"Remaining-cost order over {len(queries)} concurrent queries (random SEU boundaries, "
        "200 snapshots):",
        f"pairs ordered correctly {statistics.mean(pairs):.1%}, Spearman rho "
        f"{statistics.mean(rhos):.2f}; at the start of every query: pairs "
        f"{pair_order_accuracy(start_est, start_act):.1%}, rho {spearman_rho(start_est, start_act):.2f}.",
        "",
        f"Estimator overhead per query (share of run time): median {statistics.median(overheads):.1%}, "
        f"max {overheads[-1]:.1%}; under 10% for {sum(o < 0.1 for o in overheads)}/{len(overheads)} queries.",
    ]
    print("\n".join(lines[-5:]))
    (RESULTS / "estimator.md").write_text("\n".join(lines) + "\n")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.4))
    for ratio, errs in errors_by_ratio.items():
        ax.plot(range(len(errs)), [e * 100 for e in errs], marker=".", label=f"{ratio:.0%} flipped")
    ax.axhline(10, color="grey", linestyle="--", linewidth=0.8)
    ax.set_xlabel("batch (SEU)")
    ax.set_ylabel("|estimated - actual| / actual (%)")
    ax.set_title("Per-batch cost estimation error (SIMULATED)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(RESULTS / "estimator.png", dpi=120)


if __name__ == "__main__":
    main()
