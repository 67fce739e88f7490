"""What a statement costs besides its LLM work: plain DuckDB, the UDF road, the planned road.

The same filter over the same rows, answered by the zero-latency ``test:`` rule backend from a
warm persistent cache (no backend call is made), three ways:

- plain DuckDB, the filter written as SQL (``text LIKE '%good%'``): the floor;
- the UDF road, ``duckdb_sem.install(con)`` on a plain DuckDB connection (DuckDB runs the UDFs);
- the planned road, ``duckdb_sem.connect()`` (planned, profiled, run on the SEU loop inside the
  statement's transaction).

Two sizes: a 10-row table, where the time is the fixed cost of a statement (binding, planning,
profiling a sample, counting rows, the transaction), and a 1,000-row table repeated, where a
planned repeat reads whole answer arrays of its batches (``cache/arrays.py``). Medians of
``--repeats`` runs after a warm-up; ratios within one run are what to compare (time it alone:
another process running a model makes every figure larger). Results go to
``benchmarks/results/fixed_cost.md`` and ``fixed_cost.png``.

    python benchmarks/bench_fixed_cost.py                 # 10 and 1,000 rows, 50 repeats
    python benchmarks/bench_fixed_cost.py --repeats 10    # quicker
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import duckdb
from _results import RESULTS

import duckdb_sem

BACKEND = "test:?yes_if=good"
TABLE = (
    "CREATE OR REPLACE TABLE r AS SELECT i AS id, CASE WHEN i % 2 = 0 THEN 'good ' "
    "ELSE 'bad ' END || i AS text FROM range({rows}) t(i)"
)
PLAIN = "SELECT id FROM r WHERE text LIKE '%good%'"
UDF = "SELECT id FROM r WHERE sem_filter('{0} is positive', text)"
PLANNED = "SELECT id FROM r WHERE sem_filter('{text} is positive')"


def _median_ms(run: Callable[[], object], repeats: int) -> float:
    run()  # warm-up: the cache holds every answer after it
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def measure(rows: int, repeats: int, folder: Path) -> dict[str, float]:
    plain = duckdb.connect()
    plain.execute(TABLE.format(rows=rows))
    udf = duckdb.connect()
    udf.execute(TABLE.format(rows=rows))
    duckdb_sem.install(udf, backend=BACKEND, cache=str(folder / f"udf{rows}.sqlite"))
    con = duckdb_sem.connect(backend=BACKEND, cache=str(folder / f"planned{rows}.sqlite"))
    con.execute(TABLE.format(rows=rows))
    expected = plain.sql(PLAIN).fetchall()
    assert udf.sql(UDF).fetchall() == expected and con.sql(PLANNED).fetchall() == expected
    out = {
        "plain DuckDB": _median_ms(lambda: plain.sql(PLAIN).fetchall(), repeats),
        "UDF road (install)": _median_ms(lambda: udf.sql(UDF).fetchall(), repeats),
        "planned road (connect)": _median_ms(lambda: con.sql(PLANNED).fetchall(), repeats),
    }
    assert con.stats().physical_calls == 0  # a cached repeat: no backend call
    con.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--rows", type=int, nargs="+", default=[10, 1000])
    args = parser.parse_args()
    results: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for rows in args.rows:
            results[rows] = measure(rows, args.repeats, Path(tmp))
    lines = [
        "# Fixed cost of a statement: plain DuckDB, the UDF road, the planned road",
        "",
        f"`python benchmarks/bench_fixed_cost.py --repeats {args.repeats}`; backend `{BACKEND}`"
        " (no model), every answer from a warm persistent cache; median ms of "
        f"{args.repeats} runs.",
        "",
        "| rows | " + " | ".join(next(iter(results.values()))) + " | planned / UDF |",
        "|---:|" + "---:|" * (len(next(iter(results.values()))) + 1),
    ]
    for rows, figures in results.items():
        ratio = figures["planned road (connect)"] / figures["UDF road (install)"]
        cells = " | ".join(f"{v:.1f}" for v in figures.values())
        lines.append(f"| {rows:,} | {cells} | {ratio:.2f}x |")
    text = "\n".join(lines) + "\n"
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "fixed_cost.md").write_text(text)
    print(text)
    _plot(results, RESULTS / "fixed_cost.png")


def _plot(results: dict[int, dict[str, float]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(4.5 * len(results), 3.5), squeeze=False)
    for ax, (rows, figures) in zip(axes[0], results.items(), strict=True):
        ax.bar(range(len(figures)), list(figures.values()), color=["#999", "#4c72b0", "#dd8452"])
        ax.set_xticks(range(len(figures)), [k.split(" (")[0] for k in figures], fontsize=8)
        ax.set_title(f"{rows:,} rows, cached repeat")
        ax.set_ylabel("median ms per statement")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
