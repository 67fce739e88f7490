"""Do ``sem_agg`` summaries summarize? A critics' consensus per held-out movie, on ``llama:``.

Information, not a gate. For each movie, ``sem_agg`` over ``--reviews`` of its held-out Rotten
Tomatoes reviews (see :mod:`quality_data`; the movies are a seeded shuffle of those with enough
reviews) writes a consensus through SQL, exactly as a user's query would. Each summary is then
scored by the engine's own filter, the calibrated score of ``sem_filter('Is this summary
positive? {s}')`` on the embedded default, and the scores are ranked against each movie's
fresh share (Spearman). Also per movie: the repeated-line count and the longest span copied
from one review (both as :mod:`duckdb_sem.llm.guard` measures them), and completion tokens.

The first ``--tune`` movies of the shuffle tuned the aggregate prompt (``--set tune``); the next
``--report`` movies tuned nothing and are what the results report (``--set report``). A run
writes ``results/summary_quality_<label>.json``; ``summary_quality.md`` is rendered from every
such file present, so ``before`` (run with ``PYTHONPATH`` at an older checkout and
``--no-render``) and ``after`` sit side by side.

    PYTHONPATH=/path/to/main python benchmarks/quality_summaries.py --label before --no-render
    python benchmarks/quality_summaries.py --label after          # ~10 min on 2 busy cores
"""

from __future__ import annotations

import argparse
import json
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import pyarrow as pa
import quality_data
from _results import RESULTS

import duckdb_sem
from duckdb_sem.backends.registry import create_backend
from duckdb_sem.estimator.accuracy import spearman_rho
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import OperatorKind
from duckdb_sem.llm.template import parse_template

CONSENSUS = (
    "What is the consensus of the critics on this movie? Answer in two sentences. Reviews: {text}"
)
SENTIMENT = "Is this summary positive? {0}"
SEED = 27


@dataclass(frozen=True, slots=True)
class Summary:
    movie: str
    fresh_share: float
    reviews: list[str]
    summary: str
    score: float
    completion_tokens: int
    seconds: float


def movies(n_reviews: int) -> list[tuple[str, list[quality_data.Review]]]:
    """Movies with at least ``n_reviews`` held-out reviews, seeded shuffle, each's sample."""
    reviews, _ = quality_data.rotten_tomatoes()
    by: dict[str, list[quality_data.Review]] = {}
    for review in reviews:
        by.setdefault(review.movie, []).append(review)
    names = sorted(m for m, rs in by.items() if len(rs) >= n_reviews)
    random.Random(SEED).shuffle(names)
    picked = []
    for name in names:
        sample = sorted(by[name], key=lambda r: r.text)
        random.Random(name).shuffle(sample)
        picked.append((name, sample[:n_reviews]))
    return picked


def summarize(chosen: list[tuple[str, list[quality_data.Review]]], threads: int) -> list[Summary]:
    con = duckdb_sem.connect(backend=f"llama:?threads={threads}", cache="off")
    rows = [(m, r.text) for m, rs in chosen for r in rs]
    con.duckdb.register(
        "src", pa.table({"movie": [m for m, _ in rows], "text": [t for _, t in rows]})
    )
    con.sql("CREATE TABLE reviews AS SELECT * FROM src")
    template = CONSENSUS.replace("'", "''")
    backend = create_backend(f"llama:?threads={threads}")
    sentiment = parse_template(SENTIMENT)
    out = []
    for name, sample in chosen:
        started = time.perf_counter()
        quoted = name.replace("'", "''")
        ((text,),) = con.sql(
            f"SELECT sem_agg('{template}') FROM reviews WHERE movie = '{quoted}'"
        ).fetchall()
        seconds = time.perf_counter() - started
        tokens = con.stats().completion_tokens
        request = build_request(
            OperatorKind.FILTER, sentiment.render([text or ""]), template=sentiment
        )
        (scored,) = backend.complete([request])
        share = sum(r.fresh for r in sample) / len(sample)
        out.append(
            Summary(
                name,
                share,
                [r.text for r in sample],
                text or "",
                float(scored.score or 0.0),
                tokens,
                seconds,
            )
        )
        print(f"{name}: fresh {share:.2f} score {scored.score:+.2f} ({tokens} tokens)", flush=True)
    con.close()
    return out


def render(folder: Path) -> str:
    from duckdb_sem.llm.guard import longest_copied_span, repeated_lines

    runs = {p.stem.removeprefix("summary_quality_"): json.loads(p.read_text())
            for p in sorted(folder.glob("summary_quality_*.json"))}  # fmt: skip
    lines = [
        "# sem_agg summaries on held-out movies (benchmarks/quality_summaries.py)",
        "",
        f"Template: `sem_agg('{CONSENSUS}')`; sentiment: calibrated score of "
        f"`sem_filter('{SENTIMENT.replace('{0}', '{s}')}')`; both on `llama:` (the embedded "
        "default). Spearman of the score against the movie's fresh share. Copied span: the "
        "longest span (characters, case and whitespace ignored) of the summary found in one "
        "review. Timings are from a machine shared with other jobs: not a benchmark of speed.",
        "",
        "| run | set | movies | reviews each | Spearman | movies with a repeated line | "
        "repeated lines | longest copied span (max / median) | completion tokens per summary |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    details: list[str] = []
    for label, run in runs.items():
        rows = [Summary(**r) for r in run["summaries"]]
        repeats = [repeated_lines(r.summary) for r in rows]
        spans = sorted(longest_copied_span(r.summary, r.reviews) for r in rows)
        rho = spearman_rho([r.score for r in rows], [r.fresh_share for r in rows])
        tokens = sum(r.completion_tokens for r in rows) / len(rows)
        lines.append(
            f"| {label} | {run['set']} | {len(rows)} | {run['reviews']} | {rho:.2f} | "
            f"{sum(n > 0 for n in repeats)} | {sum(repeats)} | {spans[-1]} / "
            f"{spans[len(spans) // 2]} | {tokens:.0f} |"
        )
        details += ["", f"## {label} ({run['set']}: {run['note']})", "",
                    "| movie | fresh share | score | repeated lines | copied span | tokens | summary |",
                    "|---|---|---|---|---|---|---|"]  # fmt: skip
        for r, n in zip(rows, repeats, strict=True):
            text = r.summary.replace("|", "\\|").replace("\n", " ⏎ ")
            details.append(
                f"| {r.movie} | {r.fresh_share:.2f} | {r.score:+.2f} | {n} | "
                f"{longest_copied_span(r.summary, r.reviews)} | {r.completion_tokens} | {text} |"
            )
    return "\n".join(lines + details) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--label", default="after", help="names the run's JSON file")
    parser.add_argument("--set", choices=("tune", "report"), default="report")
    parser.add_argument("--reviews", type=int, default=12, help="reviews per movie")
    parser.add_argument("--tune", type=int, default=10, help="movies that tuned the prompt")
    parser.add_argument("--report", type=int, default=30, help="held-out movies reported")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--note", default="", help="what this run is (goes in the results)")
    parser.add_argument("--no-render", action="store_true", help="only write the JSON")
    parser.add_argument("--render-only", action="store_true", help="only render the markdown")
    args = parser.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    if not args.render_only:
        chosen = movies(args.reviews)
        chosen = chosen[: args.tune] if args.set == "tune" else chosen[args.tune :][: args.report]
        rows = summarize(chosen, args.threads)
        run = {"set": args.set, "reviews": args.reviews, "note": args.note,
               "summaries": [asdict(r) for r in rows]}  # fmt: skip
        (RESULTS / f"summary_quality_{args.label}.json").write_text(json.dumps(run, indent=1))
        rho = spearman_rho([r.score for r in rows], [r.fresh_share for r in rows])
        print(f"Spearman {rho:.3f} over {len(rows)} movies")
    if not args.no_render:
        (RESULTS / "summary_quality.md").write_text(render(RESULTS))


if __name__ == "__main__":
    main()
