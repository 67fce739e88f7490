"""A join's pairs sharing their first side's KV cache on the embedded model (issue 29, item 2).

A review-to-plot join over the bundled data: ``--reviews`` reviews of each of ``--movies``
movies against those movies' plots, one ``sem_join`` on the embedded default's join model
(gemma-3-270m), no result cache. Each template is run twice in one process: with pair segments
(the default: a pair's first side is a KV segment of its own, ``backends/llama.py``
``_pair_cut``) and without them (only the instruction and template lead are reused, as before:
the benchmark turns ``_pair_cut`` off). Reported: prompt tokens of every evaluation, the share
evaluated (not reused from the KV cache), wall time, and whether both runs return the same
pairs. Two templates: the review first (short first side) and the plot first (long first side).

Time it alone: anything else on the machine changes both sides.

    python benchmarks/bench_join_prefix.py                      # 5 movies x 6 reviews x 5 plots
    python benchmarks/bench_join_prefix.py --movies 2 --reviews 2   # a quick look
"""

from __future__ import annotations

import argparse
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


def _run(template: str, movies: int, reviews: int, segments: bool) -> dict[str, Any]:
    backend = create_backend("llama:")
    assert isinstance(backend, DefaultLlamaBackend)
    model = backend.model_for("join")
    original = LlamaBackend._pair_cut
    if not segments:
        LlamaBackend._pair_cut = lambda self, request, row, tokens: []  # type: ignore[method-assign]
    try:
        con = duckdb_sem.connect(backend=backend, cache="off")
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
        prompted = model.tokens_prompted - before[0]
        evaluated = model.tokens_evaluated - before[1]
        right = sum(1 for rid, movie in pairs if _movie_of(con, rid) == movie)
        con.close()
    finally:
        LlamaBackend._pair_cut = original  # type: ignore[method-assign]
    return {"pairs": pairs, "wall": wall, "prompted": prompted, "evaluated": evaluated,
            "right": right}  # fmt: skip


def _movie_of(con: Any, review_id: int) -> str:
    return str(con.execute("SELECT movie FROM r WHERE review_id = ?", [review_id]).fetchone()[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--movies", type=int, default=5)
    parser.add_argument("--reviews", type=int, default=6, help="reviews per movie")
    parser.add_argument("--out", type=Path, default=RESULTS / "join_prefix.md")
    args = parser.parse_args()
    n_pairs = args.movies * args.reviews * args.movies
    lines = [
        "# A join's pairs sharing their first side's KV cache (embedded default, gemma)",
        "",
        f"Review-to-plot join: {args.movies} movies x {args.reviews} reviews against "
        f"{args.movies} plots (first 600 characters) = {n_pairs} pairs, no result cache. "
        "evaluated = prompt tokens not reused from the KV cache.",
        "",
        "| template | segments | prompt tokens | evaluated | share | wall s | speed-up "
        "| pairs said yes (right) | same pairs |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, template in TEMPLATES.items():
        off = _run(template, args.movies, args.reviews, segments=False)
        on = _run(template, args.movies, args.reviews, segments=True)
        for label, run in (("off (before)", off), ("on", on)):
            row = (
                f"| {name} | {label} | {run['prompted']:,} | {run['evaluated']:,} | "
                f"{run['evaluated'] / max(1, run['prompted']):.2f} | {run['wall']:.1f} | "
                f"{off['wall'] / run['wall']:.2f}x | {len(run['pairs'])} ({run['right']}) | "
                f"{on['pairs'] == off['pairs']} |"
            )
            print(row, flush=True)
            lines.append(row)
    write_report(
        args.out,
        lines,
        f"python benchmarks/bench_join_prefix.py --movies {args.movies} --reviews {args.reviews}",
    )


if __name__ == "__main__":
    main()
