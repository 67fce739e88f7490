"""Pair decisions on held-out Rotten Tomatoes reviews: self-joins on the verdict, review-to-plot.

Information, not a gate (issue #27 item 4). Every review is held out (never the 300 bundled
ones). Movies with 20-35 reviews, fixed by name: :data:`TUNE_MOVIES` is the only movie any
choice of this change looked at; :data:`REPORT_MOVIES` and :data:`PLOT_MOVIES` are reported and
tuned nothing.

- ``same`` / ``opposite``: a self-join of one movie's reviews (``{0}`` and ``{1}`` are two
  different reviews), asking whether the two reach the same (opposite) verdict; the label is
  both fresh or both rotten (one of each). ``--pairs`` seeded pairs per movie.
- ``plot``: each of ``--plot-reviews`` reviews of five movies against each of the five plots;
  the label is "the review is of that movie".

Two plans of the verdict joins: ``nested`` (the nested loop: one decision per pair, exactly
the requests ``sem_join`` sends) and ``per_row`` (the opt-in rewrite ``per_row := ...``: one
decision per review, labels compared; :mod:`duckdb_sem.llm.pairs`). Figures: yes-share against
the true share, precision, recall, F1, and ``chance F1``: the F1 of answering yes at random
with the same yes-share (a 50/50 join said yes to 90% of its pairs scores 0.64 by chance alone).

    python benchmarks/quality_pairs.py --model gemma --threads 1
    python benchmarks/quality_pairs.py --model smollm2 --tasks same,opposite --pairs 60
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import quality_data
from _results import RESULTS

from duckdb_sem.backends.base import Backend
from duckdb_sem.backends.llama import LlamaBackend
from duckdb_sem.backends.llama_model import default_model_path, gemma_model_path
from duckdb_sem.llm.pairs import PerRow, compare
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import LLMRequest, OperatorKind
from duckdb_sem.llm.template import parse_template

TUNE_MOVIES = ("men_in_black_ii",)
REPORT_MOVIES = ("big_trouble", "panic_room")
PLOT_MOVIES = ("big_trouble", "panic_room", "john_q", "trapped", "bloody_sunday")

JOINS = {
    "same": (
        "The two film reviews reach the same overall verdict (both favourable or both "
        "unfavourable). First review: {0} Second review: {1}"
    ),
    "opposite": (
        "The two film reviews reach opposite overall verdicts (one favourable, one "
        "unfavourable). First review: {0} Second review: {1}"
    ),
}
PLOT_JOIN = "Is this review about the movie with this plot? Review: {0} Plot: {1}"
PER_ROW = "Is this review positive? {0}"


@dataclass(frozen=True, slots=True)
class Row:
    task: str
    movie: str
    plan: str
    pairs: int
    calls: int
    yes_share: float
    true_share: float
    precision: float
    recall: float
    f1: float
    chance_f1: float

    def markdown(self) -> str:
        return (
            f"| {self.task} | {self.movie} | {self.plan} | {self.pairs} | {self.calls} | "
            f"{self.yes_share:.2f} / {self.true_share:.2f} | {self.precision:.2f} | "
            f"{self.recall:.2f} | **{self.f1:.2f}** | {self.chance_f1:.2f} |"
        )


def scores(task: str, movie: str, plan: str, calls: int, got: Sequence[bool],
           truth: Sequence[bool]) -> Row:  # fmt: skip
    tp = sum(g and t for g, t in zip(got, truth, strict=True))
    yes, pos, n = sum(got), sum(truth), len(truth)
    precision = tp / yes if yes else 0.0
    recall = tp / pos if pos else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    share, base = yes / n, pos / n
    chance = 2 * base * share / (base + share) if base + share else 0.0
    return Row(task, movie, plan, n, calls, share, base, precision, recall, f1, chance)


def _decide(backend: Backend, requests: list[LLMRequest]) -> list[bool]:
    step = backend.capacity().max_batch
    out: list[bool] = []
    for i in range(0, len(requests), step):
        out += [bool(c.value) for c in backend.complete(requests[i : i + step])]
    return out


def _requests(kind: OperatorKind, source: str, rows: Sequence[Sequence[str]]) -> list[LLMRequest]:
    template = parse_template(source)
    return [build_request(kind, template.render(list(r)), template=template) for r in rows]


def verdict_pairs(backend: Backend, task: str, movie: str, reviews: list[quality_data.Review],
                  n_pairs: int, plans: Sequence[str]) -> list[Row]:  # fmt: skip
    mine = [r for r in reviews if r.movie == movie]
    every = [(i, j) for i in range(len(mine)) for j in range(len(mine)) if i != j]
    picked = random.Random(f"{movie}:{task}").sample(every, min(n_pairs, len(every)))
    same = task == "same"
    truth = [(mine[i].fresh == mine[j].fresh) == same for i, j in picked]
    out: list[Row] = []
    if "nested" in plans:
        rows = [(mine[i].text, mine[j].text) for i, j in picked]
        got = _decide(backend, _requests(OperatorKind.JOIN, JOINS[task], rows))
        out.append(scores(task, movie, "nested", len(rows), got, truth))
    if "per_row" in plans:
        rewrite = PerRow(PER_ROW, "same" if same else "different")
        used = sorted({k for pair in picked for k in pair})
        answers = _decide(backend, _requests(OperatorKind.FILTER, PER_ROW, [[mine[k].text]
                                                                           for k in used]))  # fmt: skip
        label = dict(zip(used, answers, strict=True))
        got_any = compare([label[i] for i, _ in picked], [label[j] for _, j in picked],
                          rewrite.match)  # fmt: skip
        out.append(scores(task, movie, "per_row", len(used), [bool(g) for g in got_any], truth))
    return out


def plot_pairs(backend: Backend, reviews: list[quality_data.Review], plots: dict[str, str],
               per_movie: int) -> Row:  # fmt: skip
    rng = random.Random("plot")
    rows, truth = [], []
    for movie in PLOT_MOVIES:
        for review in rng.sample([r for r in reviews if r.movie == movie], per_movie):
            for other in PLOT_MOVIES:
                rows.append((review.text, plots[other][:600]))
                truth.append(other == movie)
    got = _decide(backend, _requests(OperatorKind.JOIN, PLOT_JOIN, rows))
    return scores("plot", "5 movies", "nested", len(rows), got, truth)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=("gemma", "smollm2"), default="gemma")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--pairs", type=int, default=100, help="pairs per movie and task")
    parser.add_argument("--plot-reviews", type=int, default=4, help="reviews per plot movie")
    parser.add_argument("--tasks", default="same,opposite,plot")
    parser.add_argument("--plans", default="nested,per_row")
    parser.add_argument("--movies", default="report", choices=("report", "tune"))
    parser.add_argument("--label", default="", help="a note for the results table")
    parser.add_argument("--out", type=Path, default=RESULTS / "pair_quality.md")
    args = parser.parse_args()

    path = gemma_model_path() if args.model == "gemma" else default_model_path()
    backend = LlamaBackend(path=path, spec=f"llama:{path}", threads=args.threads)
    movies = REPORT_MOVIES if args.movies == "report" else TUNE_MOVIES
    tasks, plans = args.tasks.split(","), args.plans.split(",")
    try:
        reviews, plots = quality_data.rotten_tomatoes()
    except quality_data.MissingData as err:
        raise SystemExit(f"quality_pairs: {err}") from None
    results: list[Row] = []
    for task in (t for t in tasks if t in JOINS):
        for movie in movies:
            for row in verdict_pairs(backend, task, movie, reviews, args.pairs, plans):
                results.append(row)
                print(row.markdown(), flush=True)
    if "plot" in tasks and args.movies == "report":
        results.append(plot_pairs(backend, reviews, plots, args.plot_reviews))
        print(results[-1].markdown(), flush=True)
    command = (
        f"python benchmarks/quality_pairs.py --model {args.model} --threads {args.threads} "
        f"--pairs {args.pairs} --plot-reviews {args.plot_reviews} --tasks {args.tasks} "
        f"--plans {args.plans} --movies {args.movies}"
    )
    lines = [
        f"## {args.model}, {args.movies} movies{': ' + args.label if args.label else ''}",
        "",
        f"`{backend.backend_id}`, {args.threads} thread(s).",
        "",
        "| task | movie | plan | pairs | calls | yes / true share | precision | recall | F1 "
        "| chance F1 |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *(r.markdown() for r in results),
        "",
        f"Reproduce: `{command}`",
        "",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("a", encoding="utf-8") as f:  # one section per model and run
        f.write("\n".join(lines) + "\n")
    print(f"appended to {args.out}")


if __name__ == "__main__":
    main()
