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
rows' own evaluations, without the content-free calibration rows), wall time, how many runs of
one first value the model evaluated the pairs in, and whether each run decides every pair as
``no segments`` (the previous default) does: the count of equal decisions and the largest gap
between calibrated scores. Under each template's table, the bound ordering can reach: the share
evaluated when each first value is evaluated once, and how many times fewer tokens than without
segments that is (the first side's tokens over the pair's, beyond the lead). Two templates:
the review first (a short first side, pairs ordered by review) and the plot first (a long first
side).

Each run starts alike (the model warmed on an unrelated row, so its KV cache holds nothing of
the join). Time it alone: anything else on the machine changes every row.

    python benchmarks/bench_join_prefix.py                      # 5 movies x 6 reviews x 5 plots
    python benchmarks/bench_join_prefix.py --movies 2 --reviews 2   # a quick look
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _results import RESULTS, write_report

import duckdb_sem
from duckdb_sem.backends.llama import LlamaBackend
from duckdb_sem.backends.llama_default import DefaultLlamaBackend
from duckdb_sem.backends.registry import create_backend
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import Completion, LLMRequest, OperatorKind

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
    # every run starts alike: weights paged in, the KV cache holding nothing of the join's
    model.complete([build_request(OperatorKind.FILTER, "Is this city in Germany? Lyon.")])
    original = LlamaBackend._pair_cut
    if not segments:
        LlamaBackend._pair_cut = lambda self, *args, **kwargs: []  # type: ignore[method-assign]
    answers, sides = _record(model)
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
        del model.complete, model._margin  # the class's own again
    return {"pairs": pairs, "wall": wall, "prompted": prompted, "evaluated": evaluated,
            "right": right, "hit_rate": stats.prefix_hit_rate, "answers": answers,
            "runs": sum(1 for _ in itertools.groupby(sides)), "values": len(set(sides))}  # fmt: skip


def _record(
    model: LlamaBackend,
) -> tuple[dict[str, tuple[object, float, str, int, int]], list[str]]:
    """Every pair's decision, score, first side, prompt and KV-cached tokens by its prompt row,
    and the first side of each pair in the order the model evaluates them (calibration rows
    left out), as ``model`` answers."""
    answers: dict[str, tuple[object, float, str, int, int]] = {}
    sides: list[str] = []
    complete, margin = model.complete, model._margin

    def recording(requests: Sequence[LLMRequest]) -> list[Completion]:
        out = complete(requests)
        for r, c in zip(requests, out, strict=True):
            answers[r.row] = (c.value, float(c.score or 0.0), r.first_side() or "",
                              c.prompt_tokens, c.cached_tokens)  # fmt: skip
        return out

    def evaluating(request: LLMRequest, row: str) -> tuple[float, int, int]:
        if row == request.row:
            sides.append(request.first_side(row) or "")
        return margin(request, row)

    model.complete = recording  # type: ignore[method-assign]
    model._margin = evaluating  # type: ignore[method-assign]
    return answers, sides


def _same(run: dict[str, Any], base: dict[str, Any]) -> tuple[int, int, float]:
    """How many pairs ``run`` decides as ``base`` did, of how many, and the largest score gap."""
    common = run["answers"].keys() & base["answers"].keys()
    same = sum(run["answers"][k][0] == base["answers"][k][0] for k in common)
    gap = max((abs(run["answers"][k][1] - base["answers"][k][1]) for k in common), default=0.0)
    return same, len(common), gap


def _bound(run: dict[str, Any]) -> tuple[float, float, float, float]:
    """What ordering can reach at best: the least share of the pairs' prompt tokens a segmented
    run evaluates (each first value once, the instruction and lead always cached), the mean
    tokens a pair holds beyond the lead in its first value's segment and after it, and how many
    times fewer tokens than without segments (each pair evaluating both) that is.

    Read from the run's own KV-cached counts: the lead ends where the least-cached pair's reuse
    ended (the first pair of a process may have had none), a value's segment where its
    most-cached pair's did."""
    rows = list(run["answers"].values())
    lead = min((r[4] for r in rows if r[4] > 0), default=0)
    cut: dict[str, int] = {}
    for _, _, side, _, cached in rows:
        cut[side] = max(cut.get(side, lead), cached)
    prompted = sum(r[3] for r in rows)
    least = sum(r[3] - cut[r[2]] for r in rows) + sum(c - lead for c in cut.values())
    first = sum(cut[r[2]] - lead for r in rows) / len(rows)
    rest = sum(r[3] - cut[r[2]] for r in rows) / len(rows)
    once = first * len(cut) / len(rows)  # a value's tokens, once per value, per pair
    return least / prompted, first, rest, (first + rest) / max(1e-9, once + rest)


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
        "`no segments` (else the first run) and against `unordered`; runs = how many runs of "
        "one first value the model evaluated the pairs in (values: how many first values); "
        "same decisions = pairs decided as `no segments` decided them (else the first run), "
        "of all, and the largest gap between their calibrated scores.",
        *(["", args.note] if args.note else []),
        "",
        "| template | run | prompt tokens | evaluated | share | hit rate | wall s | speed-up "
        "| vs unordered | runs (values) | pairs said yes (right) | same decisions | score gap |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    chosen = [t.strip() for t in args.templates.split(",")]
    wanted = [r.strip() for r in args.runs.split(",")]
    if any(r not in {label for label, _, _ in RUNS} for r in wanted):
        parser.error(f"--runs takes {', '.join(label for label, _, _ in RUNS)}")
    unknown = [t for t in chosen if t not in TEMPLATES]
    if unknown:
        parser.error(f"unknown template {unknown[0]!r}; use {', '.join(TEMPLATES)}")
    summary: list[str] = []
    for name in chosen:
        template = TEMPLATES[name]
        runs = {label: _run(template, args.movies, args.reviews, segments=segments, order=order,
                            spec=args.backend)
                for label, segments, order in RUNS if label in wanted}  # fmt: skip
        base = runs.get("no segments") or next(iter(runs.values()))
        unordered = runs.get("unordered") or base
        for label, run in runs.items():
            same, of, gap = _same(run, base)
            row = (
                f"| {name} | {label} | {run['prompted']:,} | {run['evaluated']:,} | "
                f"{run['evaluated'] / max(1, run['prompted']):.2f} | {run['hit_rate']:.2f} | "
                f"{run['wall']:.1f} | {base['wall'] / run['wall']:.2f}x | "
                f"{unordered['wall'] / run['wall']:.2f}x | {run['runs']} ({run['values']}) | "
                f"{len(run['pairs'])} ({run['right']}) | {same}/{of} | {gap:.1e} |"
            )
            print(row, flush=True)
            lines.append(row)
        segmented = runs.get("ordered") or runs.get("unordered")
        if segmented is not None:
            least, first, rest, fewer = _bound(segmented)
            summary.append(
                f"- {name}: beyond the instruction and lead, a pair holds {first:.0f} tokens of "
                f"its first value (with the template text after it) and {rest:.0f} after them. "
                f"At best (each first value evaluated once) a segmented run evaluates "
                f"{least:.2f} of the pairs' prompt tokens (hit rate {1 - least:.2f}): "
                f"{fewer:.2f}x fewer than without segments, a bound on its speed-up."
            )
    write_report(
        args.out,
        [*lines, *(["", *summary] if summary else [])],
        f"python benchmarks/bench_join_prefix.py --movies {args.movies} --reviews {args.reviews}"
        + (f" --backend '{args.backend}'" if args.backend != "llama:" else "")
        + (f" --templates '{args.templates}'" if chosen != list(TEMPLATES) else "")
        + (f" --runs '{args.runs}'" if len(wanted) != len(RUNS) else ""),
    )


if __name__ == "__main__":
    main()
