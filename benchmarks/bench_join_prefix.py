"""A join's pairs sharing their first side's KV cache on the embedded model (issue 29, item 2).

A review-to-plot join over the bundled data: ``--reviews`` reviews of each of ``--movies``
movies against those movies' plots, one ``sem_join`` on the embedded default's join model
(gemma-3-270m), no result cache. Each template is run three times in one process:

- ``no segments``: only the instruction and template lead are reused (the benchmark turns
  ``backends/llama.py`` ``_pair_cut`` off), pairs as DuckDB emits them;
- ``unordered``: a pair's first side is a KV segment of its own, pairs as DuckDB emits them
  (``RuntimeOptions.order_pairs`` off: the runtime before pair ordering);
- ``ordered``: segments, and the pairs ordered by the template's first field (the default,
  ``runtime/pair_order.py``).

Reported: prompt tokens of every evaluation, the share evaluated (not reused from the KV
cache), the query's prefix hit rate as ``con.stats()`` reports it (``prefix_hit_rate``: the
rows' own evaluations, without the content-free calibration rows), wall time, and whether the
segmented runs return the same pairs. Two templates: the review first (a short first side,
pairs ordered by review) and the plot first (a long first side).

Time it alone: anything else on the machine changes every row.

    python benchmarks/bench_join_prefix.py                      # 5 movies x 6 reviews x 5 plots
    python benchmarks/bench_join_prefix.py --movies 2 --reviews 2   # a quick look
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path
from typing import Any

from _results import RESULTS, write_report

import duckdb_sem
from duckdb_sem.backends.llama import LlamaBackend
from duckdb_sem.backends.llama_default import DefaultLlamaBackend
from duckdb_sem.backends.registry import create_backend

TEMPLATES = {
    "review first": "Is this review about the movie with this plot? Review: {r.text} Plot: {p.plot}",
    "plot first": "Is this review about the movie with this plot? Plot: {p.plot} Review: {r.text}",
}
#: (label, segments, order_pairs)
RUNS = (("no segments", False, False), ("unordered", True, False), ("ordered", True, True))


def _run(template: str, movies: int, reviews: int, *, segments: bool, order: bool,
         spec: str) -> dict[str, Any]:  # fmt: skip
    backend = create_backend(spec)
    assert isinstance(backend, DefaultLlamaBackend)
    model = backend.model_for("join")
    original = LlamaBackend._pair_cut
    if not segments:
        LlamaBackend._pair_cut = lambda self, request, row, tokens: []  # type: ignore[method-assign]
    try:
        con = duckdb_sem.connect(backend=backend, cache="off")
        con.runtime = dataclasses.replace(con.runtime_options(), order_pairs=order)
        duckdb_sem.load_demo(con)
        con.execute(
            f"CREATE TABLE m AS SELECT movie FROM (SELECT DISTINCT movie FROM reviews) "
            f"ORDER BY movie LIMIT {movies}"
        )
        con.execute(
            "CREATE TABLE r AS SELECT review_id, movie, text FROM reviews WHERE movie IN "
            f"(SELECT movie FROM m) QUALIFY row_number() OVER (PARTITION BY movie ORDER BY "
            f"review_id) <= {reviews}"
        )
        con.execute("CREATE TABLE p AS SELECT movie, left(plot, 600) AS plot FROM plots "
                    "WHERE movie IN (SELECT movie FROM m)")  # fmt: skip
        before = (model.tokens_prompted, model.tokens_evaluated)
        start = time.perf_counter()
        pairs = con.execute(
            f"SELECT r.review_id, p.movie FROM r JOIN p ON sem_join('{template}') ORDER BY 1, 2"
        ).fetchall()
        wall = time.perf_counter() - start
        stats = con.stats()
        prompted = model.tokens_prompted - before[0]
        evaluated = model.tokens_evaluated - before[1]
        right = sum(1 for rid, movie in pairs if _movie_of(con, rid) == movie)
        con.close()
    finally:
        LlamaBackend._pair_cut = original  # type: ignore[method-assign]
    return {"pairs": pairs, "wall": wall, "prompted": prompted, "evaluated": evaluated,
            "right": right, "hit_rate": stats.prefix_hit_rate}  # fmt: skip


def _movie_of(con: Any, review_id: int) -> str:
    return str(con.execute("SELECT movie FROM r WHERE review_id = ?", [review_id]).fetchone()[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--movies", type=int, default=5)
    parser.add_argument("--reviews", type=int, default=6, help="reviews per movie")
    parser.add_argument("--out", type=Path, default=RESULTS / "join_prefix.md")
    parser.add_argument("--note", default="", help="a line on how the machine was loaded")
    parser.add_argument("--templates", default=",".join(TEMPLATES),
                        help="which templates to run, comma-separated (default: both)")  # fmt: skip
    parser.add_argument("--runs", default=",".join(label for label, _, _ in RUNS),
                        help="which runs, comma-separated (default: all three)")  # fmt: skip
    parser.add_argument("--backend", default="llama:",
                        help="the embedded default's spec (llama:?share_cpu=off on a shared "
                        "machine: other processes' CPU turns would count in every wall time)")  # fmt: skip
    args = parser.parse_args()
    n_pairs = args.movies * args.reviews * args.movies
    lines = [
        "# A join's pairs sharing their first side's KV cache (embedded default, gemma)",
        "",
        f"Review-to-plot join: {args.movies} movies x {args.reviews} reviews against "
        f"{args.movies} plots (first 600 characters) = {n_pairs} pairs, no result cache. "
        "evaluated = prompt tokens not reused from the KV cache (calibration rows included); "
        "hit rate = `con.stats().prefix_hit_rate` (the pairs' own prompts); speed-up against "
        "`no segments` (else the first run) and against `unordered`; same pairs = the same "
        "answers as `unordered`.",
        *(["", args.note] if args.note else []),
        "",
        "| template | run | prompt tokens | evaluated | share | hit rate | wall s | speed-up "
        "| vs unordered | pairs said yes (right) | same pairs |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    chosen = [t.strip() for t in args.templates.split(",")]
    wanted = [r.strip() for r in args.runs.split(",")]
    if any(r not in {label for label, _, _ in RUNS} for r in wanted):
        parser.error(f"--runs takes {', '.join(label for label, _, _ in RUNS)}")
    unknown = [t for t in chosen if t not in TEMPLATES]
    if unknown:
        parser.error(f"unknown template {unknown[0]!r}; use {', '.join(TEMPLATES)}")
    for name in chosen:
        template = TEMPLATES[name]
        runs = {label: _run(template, args.movies, args.reviews, segments=segments, order=order,
                            spec=args.backend)
                for label, segments, order in RUNS if label in wanted}  # fmt: skip
        base = runs.get("no segments") or next(iter(runs.values()))
        unordered = runs.get("unordered") or base
        for label, run in runs.items():
            row = (
                f"| {name} | {label} | {run['prompted']:,} | {run['evaluated']:,} | "
                f"{run['evaluated'] / max(1, run['prompted']):.2f} | {run['hit_rate']:.2f} | "
                f"{run['wall']:.1f} | {base['wall'] / run['wall']:.2f}x | "
                f"{unordered['wall'] / run['wall']:.2f}x | {len(run['pairs'])} ({run['right']}) | "
                f"{run['pairs'] == unordered['pairs']} |"
            )
            print(row, flush=True)
            lines.append(row)
    write_report(
        args.out,
        lines,
        f"python benchmarks/bench_join_prefix.py --movies {args.movies} --reviews {args.reviews}"
        + (f" --backend '{args.backend}'" if args.backend != "llama:" else "")
        + (f" --templates '{args.templates}'" if chosen != list(TEMPLATES) else "")
        + (f" --runs '{args.runs}'" if len(wanted) != len(RUNS) else ""),
    )


if __name__ == "__main__":
    main()
