"""How fast a backend answers, and how well EXPLAIN SEMANTIC's time estimate holds.

Measures, with the cache off, a ``sem_filter`` and a ``sem_map`` over the same bundled reviews
and solves the two runs' wall times for the backend's prompt and completion rates::

    T_filter = P_f / r_prompt + C_f / r_completion
    T_map    = P_m / r_prompt + C_m / r_completion

(P, C: the prompt and completion tokens the backend reported). Then, on other rows, a query
with both operators is explained (its estimated time, from the backend's own
``Backend.throughput()``) and run, and the estimate is set against the measured time. Results:
``results/throughput.md``. The rates of ``llama:`` in ``duckdb_sem/backends/llama.py`` are
this benchmark's figures.

    python benchmarks/bench_throughput.py --rows 24 --threads 2
"""

from __future__ import annotations

import argparse
import os
import re
import time
from pathlib import Path

from _results import RESULTS

import duckdb_sem
from duckdb_sem.data import dataset_path

FILTER = "SELECT count(*) FROM r WHERE sem_filter('Is this review positive? {text}')"
MAP = "SELECT sem_map('Summarize the review in five words: {text}') AS gist FROM r"
BOTH = (
    "SELECT sem_map('Summarize the review in five words: {text}') AS gist FROM r "
    "WHERE sem_filter('Does this review praise the acting? {text}')"
)


def _open(backend: str, first: int, rows: int) -> duckdb_sem.SemConnection:
    con = duckdb_sem.connect(backend=backend, cache="off")
    con.execute(
        f"CREATE TABLE r AS SELECT * FROM '{dataset_path('rt_reviews.csv')}' "
        f"WHERE review_id > {first} ORDER BY review_id LIMIT {rows}"
    )
    return con


def _run(con: duckdb_sem.SemConnection, sql: str) -> tuple[float, int, int, int]:
    started = time.perf_counter()
    con.sql(sql).fetchall()
    seconds = time.perf_counter() - started
    s = con.stats()
    return seconds, s.physical_calls, s.physical_prompt_tokens, s.physical_completion_tokens


def _estimate(con: duckdb_sem.SemConnection, sql: str) -> tuple[str, float | None]:
    text = con.explain_semantic(sql)
    line = next(x for x in text.splitlines() if x.startswith("time"))
    found = re.match(r"time≈([\d.,e+-]+) (s|min|h) ", line)
    if found is None:
        return line, None
    scale = {"s": 1.0, "min": 60.0, "h": 3600.0}[found.group(2)]
    return line, float(found.group(1).replace(",", "")) * scale


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--backend", default="llama:")
    ap.add_argument("--threads", type=int, default=2, help="llama: threads")
    ap.add_argument("--rows", type=int, default=24)
    ap.add_argument("--out", default="throughput")
    args = ap.parse_args()
    load = os.getloadavg()[0]
    backend = args.backend
    if backend.startswith("llama:") and "threads=" not in backend:
        backend += f"{'&' if '?' in backend else '?'}threads={args.threads}"
    con = _open(backend, 0, args.rows)
    _run(con, "SELECT sem_filter('warm-up {text}') FROM r LIMIT 1")  # load the model
    tf, nf, pf, cf = _run(con, FILTER)
    tm, nm, pm, cm = _run(con, MAP)
    con.close()
    # Cramer's rule for x = 1/r_prompt, y = 1/r_completion
    det = pf * cm - pm * cf
    x = (tf * cm - tm * cf) / det
    y = (pf * tm - pm * tf) / det
    prompt_rate = 1 / x if x > 0 else float("inf")
    completion_rate = 1 / y if y > 0 else float("inf")

    check = _open(backend, 100, args.rows)
    line, estimated = _estimate(check, BOTH)
    tb, nb, pb, cb = _run(check, BOTH)
    check.close()
    solved = pb / prompt_rate + cb / completion_rate

    rows = [
        ("sem_filter", args.rows, nf, pf, cf, tf),
        ("sem_map", args.rows, nm, pm, cm, tm),
        ("sem_filter + sem_map (other rows)", args.rows, nb, pb, cb, tb),
    ]
    out: list[str] = [
        f"# Backend throughput: `{backend}`",
        "",
        f"Command: `python benchmarks/bench_throughput.py --backend {args.backend} "
        f"--threads {args.threads} --rows {args.rows}` (cache off), "
        f"{os.cpu_count()} CPUs, load average {load:.1f} at the start.",
        "",
        "| query | rows | backend calls | prompt tokens | completion tokens | seconds |",
        "|---|---|---|---|---|---|",
        *(f"| {q} | {r} | {n} | {p:,} | {c:,} | {t:.2f} |" for q, r, n, p, c, t in rows),
        "",
        f"Solved from the first two runs: **{prompt_rate:,.0f} prompt tokens/s** and "
        f"**{completion_rate:,.1f} completion tokens/s**.",
        "",
        "Check on the third query (rows 101 on):",
        "",
        f"- EXPLAIN SEMANTIC said: `{line}`",
        f"- measured: {tb:.2f} s; the solved rates applied to its measured tokens: {solved:.2f} s",
    ]
    if estimated is not None:
        out.append(f"- estimate / measured: {estimated / tb:.2f}")
    path = Path(RESULTS) / f"{args.out}.md"
    path.write_text("\n".join(out) + "\n")
    print("\n".join(out))


if __name__ == "__main__":
    main()
