"""Held-out answer quality of the embedded model (``llama:``, SmolLM2-135M) on the bundled data.

Prompts and calibration were tuned on reviews 1-100 only; this reports on reviews 101-300 and on
join pairs built from those reviews, so the figures are not fitted to the rows they are measured
on. All requests go through ``LlamaBackend.complete`` exactly as the operators send them
(``build_request``), so the figures are what ``sem_filter`` / ``sem_join`` / ``sem_map`` give.

- filter: ``'Is this movie review positive? {text}'``, label ``fresh``; accuracy of the decision
  and ROC AUC of its calibrated score.
- join: ``'Is this review about the movie with this plot? Review: {r.text} Plot: {p.plot}'``; every
  ``--join-step``-th held-out review against its own movie's plot and three other plots (fixed
  seed), base rate 0.25; accuracy, yes-rate and AUC.
- map: ``'Rate the movie review "{text}" from 1 (awful) to 5 (excellent)'`` as ``INTEGER`` on every
  ``--map-step``-th held-out review; accuracy of ``rating >= 3`` against ``fresh``, AUC of the
  rating, and the distribution of ratings.

Results go to ``benchmarks/results/embedded_quality.md``. Greedy and seeded: a rerun on the same
thread count gives the same answers. One thread is the default because the machine is shared
(llama.cpp with two threads on two busy cores was ten times slower).

    python benchmarks/bench_embedded_quality.py                 # about 10 minutes on a busy CPU
    python benchmarks/bench_embedded_quality.py --threads 2 --map-step 4 --join-step 20
"""

from __future__ import annotations

import argparse
import collections
import csv
import random
import time
from collections.abc import Sequence
from pathlib import Path

from _results import RESULTS

from duckdb_sem.backends.llama import LlamaBackend
from duckdb_sem.backends.registry import create_backend
from duckdb_sem.data import dataset_path
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import Completion, LLMRequest, OperatorKind

HELD_OUT = slice(100, 300)  # reviews 101-300; 1-100 were used for tuning
FILTER = "Is this movie review positive? {text}"
JOIN = "Is this review about the movie with this plot? Review: {text} Plot: {plot}"
MAP = 'Rate the movie review "{text}" from 1 (awful) to 5 (excellent)'


def _rows(name: str) -> list[dict[str, str]]:
    with dataset_path(name).open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def auc(scores: Sequence[float], labels: Sequence[bool]) -> float:
    """ROC AUC by pairwise comparison (ties count half)."""
    pos = [s for s, lab in zip(scores, labels, strict=True) if lab]
    neg = [s for s, lab in zip(scores, labels, strict=True) if not lab]
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def _run(backend: LlamaBackend, requests: list[LLMRequest]) -> tuple[list[Completion], float]:
    started = time.perf_counter()
    step = backend.capacity().max_batch
    out: list[Completion] = []
    for i in range(0, len(requests), step):
        out += backend.complete(requests[i : i + step])
    return out, (time.perf_counter() - started) / max(1, len(requests))


def join_pairs(
    reviews: list[dict[str, str]], plots: dict[str, str], step: int
) -> list[tuple[str, str, bool]]:
    """Each chosen review against its own plot and three others (seeded)."""
    rng = random.Random(0)
    movies = sorted(plots)
    out = []
    for review in reviews[::step]:
        others = rng.sample([m for m in movies if m != review["movie"]], 3)
        for movie in [review["movie"], *others]:
            out.append((review["text"], plots[movie], movie == review["movie"]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--join-step", type=int, default=10, help="every n-th held-out review")
    parser.add_argument("--map-step", type=int, default=2, help="every n-th held-out review")
    parser.add_argument("--out", type=Path, default=RESULTS / "embedded_quality.md")
    args = parser.parse_args()

    backend = create_backend(f"llama:?threads={args.threads}")
    assert isinstance(backend, LlamaBackend)
    reviews = _rows("rt_reviews.csv")[HELD_OUT]
    plots = {p["movie"]: p["plot"] for p in _rows("rt_plots.csv")}
    labels = [r["fresh"] == "True" for r in reviews]
    lines = [
        "# Embedded model quality on held-out labelled data",
        "",
        f"Backend `{backend.backend_id}`, {args.threads} thread(s). Tuned on reviews 1-100; "
        "measured on reviews 101-300 (and join pairs from them).",
        "",
        "| operator | rows | accuracy | ROC AUC | yes-rate / base rate | s per row |",
        "|---|---|---|---|---|---|",
    ]

    requests = [build_request(OperatorKind.FILTER, FILTER.format(text=r["text"])) for r in reviews]
    answers, per_row = _run(backend, requests)
    scores = [float(a.score or 0.0) for a in answers]
    accuracy = sum(a.value == lab for a, lab in zip(answers, labels, strict=True)) / len(labels)
    yes = sum(bool(a.value) for a in answers) / len(answers)
    lines.append(
        f"| sem_filter (positive review) | {len(answers)} | {accuracy:.3f} | "
        f"{auc(scores, labels):.3f} | {yes:.2f} / {sum(labels) / len(labels):.2f} | {per_row:.2f} |"
    )
    print(lines[-1], flush=True)

    pairs = join_pairs(reviews, plots, args.join_step)
    requests = [build_request(OperatorKind.JOIN, JOIN.format(text=t, plot=p)) for t, p, _ in pairs]
    answers, per_row = _run(backend, requests)
    jlabels = [lab for *_, lab in pairs]
    scores = [float(a.score or 0.0) for a in answers]
    accuracy = sum(a.value == lab for a, lab in zip(answers, jlabels, strict=True)) / len(pairs)
    yes = sum(bool(a.value) for a in answers) / len(answers)
    lines.append(
        f"| sem_join (review x plot) | {len(pairs)} pairs | {accuracy:.3f} | "
        f"{auc(scores, jlabels):.3f} | {yes:.2f} / 0.25 | {per_row:.2f} |"
    )
    print(lines[-1], flush=True)

    chosen = reviews[:: args.map_step]
    mlabels = [r["fresh"] == "True" for r in chosen]
    requests = [
        build_request(OperatorKind.MAP, MAP.format(text=r["text"]), output_type="INTEGER")
        for r in chosen
    ]
    answers, per_row = _run(backend, requests)
    ratings = [a.value if isinstance(a.value, int) else 0 for a in answers]
    accuracy = sum((v >= 3) == lab for v, lab in zip(ratings, mlabels, strict=True)) / len(chosen)
    counts = collections.Counter(ratings)
    lines.append(
        f"| sem_map INTEGER rating (>= 3 as fresh) | {len(chosen)} | {accuracy:.3f} | "
        f"{auc([float(v) for v in ratings], mlabels):.3f} | - | {per_row:.2f} |"
    )
    print(lines[-1], flush=True)
    lines += [
        "",
        "Ratings returned: "
        + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items(), key=lambda kv: kv[0])),
        "",
        "Reproduce: `python benchmarks/bench_embedded_quality.py "
        f"--threads {args.threads} --join-step {args.join_step} --map-step {args.map_step}`",
        "",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines), encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
