"""Benchmark (information, not a gate): plan enumeration and choice time by operators and joins.

Synthetic queries: ``J`` equi-joins over ``J + 1`` tables and ``N`` semantic operators (every
third a ``sem_map``, every fourth filter reads a map's output, the rest filters on a random
table), built directly as plans so that DuckDB is not timed. For each (N, J): the exact size of
the plan space, the plans enumerated (at most ``--max-plans``; above that the pruning of
``enumerate_plans`` applies), and the median enumeration and choice times.

    python benchmarks/bench_optimizer.py            # writes benchmarks/results/bench_optimizer.{md,png}
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from _results import RESULTS

from duckdb_sem.llm.request import OperatorKind
from duckdb_sem.optimizer import CostModel, choose_plan, enumerate_plans
from duckdb_sem.plan import (
    Join,
    Node,
    Predicate,
    Project,
    ProjectItem,
    Scan,
    SemCall,
    SemFilter,
    SemMap,
    quote,
)


def query(n_ops: int, joins: int, seed: int = 0) -> Node:
    rng = random.Random(seed * 1000 + n_ops * 10 + joins)
    node: Node = Scan("t0", "t0", ("id", "k", "text"))
    for i in range(1, joins + 1):
        keys = frozenset({f"t{i - 1}.k", f"t{i}.id"})
        cond = Predicate.parse(f'"t{i - 1}.k" = "t{i}.id"', keys)
        node = Join(node, Scan(f"t{i}", f"t{i}", ("id", "k", "text")), cond)
    maps: list[str] = []
    for j in range(n_ops):
        table = f"t{rng.randint(0, joins)}.text"
        if j % 3 == 2:
            node = SemMap(node, SemCall(f"{{0}} m{j}", (table,), OperatorKind.MAP), f"m{j}")
            maps.append(f"m{j}")
        elif j % 4 == 3 and maps:
            node = SemFilter(node, SemCall(f"{{0}} f{j}", (rng.choice(maps),)))
        else:
            words = " ".join(["w"] * rng.randint(1, 30))
            node = SemFilter(node, SemCall(f"{{0}} {words} f{j}", (table,)))
    return Project(node, (ProjectItem.parse(quote("t0.id"), "id", frozenset({"t0.id"})),))


def timed(fn: object, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-plans", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rows = []
    for joins in range(4):
        tables = {f"t{i}": 10_000.0 / (i + 1) for i in range(joins + 1)}
        model = CostModel(table_rows=tables)
        for n_ops in range(2, 11):
            plan = query(n_ops, joins)
            space = enumerate_plans(plan, max_plans=args.max_plans, rank=model.rank)
            enum_ms = timed(
                lambda p=plan, m=model: enumerate_plans(p, max_plans=args.max_plans, rank=m.rank),
                args.repeat,
            )
            choose_ms = timed(
                lambda p=plan, m=model: choose_plan(p, m, max_plans=args.max_plans), args.repeat
            )
            rows.append((n_ops, joins, space.total, len(space.plans), enum_ms, choose_ms,
                         space.pruning or "-"))  # fmt: skip
            print(rows[-1], flush=True)
    RESULTS.mkdir(exist_ok=True)
    lines = [
        f"# Optimizer benchmark (max_plans={args.max_plans}, median of {args.repeat})",
        "",
        "| sem ops | joins | plan space | enumerated | enumerate ms | choose ms | pruning |",
        "|---:|---:|---:|---:|---:|---:|---|",
    ]
    lines += [
        f"| {n} | {j} | {t:,} | {e:,} | {a:.2f} | {c:.2f} | {p} |" for n, j, t, e, a, c, p in rows
    ]
    (RESULTS / "bench_optimizer.md").write_text("\n".join(lines) + "\n")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(7, 4))
    for joins in range(4):
        pts = [(n, c) for n, j, _, _, _, c, _ in rows if j == joins]
        ax.plot([n for n, _ in pts], [c for _, c in pts], marker="o", label=f"{joins} joins")
    ax.set_xlabel("semantic operators")
    ax.set_ylabel("enumerate + choose, ms (median)")
    ax.set_yscale("log")
    ax.axhline(100, color="grey", linestyle="--", linewidth=0.8)
    ax.legend()
    ax.set_title(f"Plan choice time (max_plans={args.max_plans})")
    fig.tight_layout()
    fig.savefig(RESULTS / "bench_optimizer.png", dpi=120)


if __name__ == "__main__":
    main()
