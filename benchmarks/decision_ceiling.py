"""How far a decision's threshold is from the best one, on held-out rows (issue 27 item 3).

For the five phrasings of ``rt-phrasings`` (:data:`quality_shapes.PHRASINGS`, the same 200
held-out Rotten Tomatoes reviews as ``bench_embedded_quality.py --tasks rt-phrasings``), it
scores every row on ``--backend`` and prints, per phrasing, the accuracy at the engine's own
threshold (calibrated score > 0), the ROC AUC, the yes share, and the accuracy at the best
threshold chosen *with the labels*: an upper bound that no label-free calibration can beat.
It chooses nothing; it says whether a miss is the threshold's or the ranking's.

``--bounds`` runs no model: it says what per-row accuracy the tasks built on one decision per
row need, on the benchmark's own movies, if each row is right with probability ``p``
independently (errors unbiased): the mean relative error of per-movie POSITIVE counts
(``rt-labels-words``' 12 report movies) and the F1 of ``per_row :=`` same- and
opposite-verdict self-joins (``quality_pairs``' report movies, every ordered pair).

    python benchmarks/decision_ceiling.py --out /tmp/ceiling.json
    python benchmarks/decision_ceiling.py --backend 'llama:?threads=1&layout=template' --out F
    python benchmarks/decision_ceiling.py --bounds

Data: ``sh benchmarks/fetch_quality_data.sh`` once.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
from pathlib import Path

import quality_data
import quality_pairs
import quality_shapes
from bench_embedded_quality import auc

from duckdb_sem.backends.registry import create_backend
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import OperatorKind
from duckdb_sem.llm.template import parse_template


def accuracy(scores: list[float], labels: list[bool], threshold: float = 0.0) -> float:
    """The share of rows where ``score > threshold`` is the label."""
    return sum((s > threshold) == y for s, y in zip(scores, labels, strict=True)) / len(labels)


def best_threshold_accuracy(scores: list[float], labels: list[bool]) -> float:
    """The accuracy of ``score > t`` at the best ``t`` (every distinct score, and below all)."""
    return max(accuracy(scores, labels, t) for t in [min(scores) - 1.0, *sorted(set(scores))])


def _count_error(fresh: list[list[bool]], p: float, rng: random.Random) -> float:
    errors = []
    for movie in fresh:
        said = sum(f if rng.random() < p else not f for f in movie)
        errors.append(abs(said - sum(movie)) / max(1, sum(movie)))  # as quality_shapes
    return statistics.mean(errors)


def _pair_f1(fresh: list[bool], same: bool, p: float, rng: random.Random) -> float:
    said = [f if rng.random() < p else not f for f in fresh]
    tp = fp = fn = 0
    for i in range(len(fresh)):
        for j in range(len(fresh)):
            if i != j:
                truth = (fresh[i] == fresh[j]) == same
                yes = (said[i] == said[j]) == same
                tp, fp, fn = (
                    tp + (truth and yes),
                    fp + (yes and not truth),
                    fn + (truth and not yes),
                )
    return 2 * tp / (2 * tp + fp + fn) if tp else 0.0


def bounds(trials: int = 2000) -> None:
    """Expected label count error and per_row F1 against per-row accuracy (no model)."""
    labelled: dict[str, list[bool]] = {}
    for review in quality_shapes.report_reviews("labels"):
        labelled.setdefault(review.movie, []).append(review.fresh)
    reviews, _ = quality_data.rotten_tomatoes()
    movies = {m: [r.fresh for r in reviews if r.movie == m] for m in quality_pairs.REPORT_MOVIES}
    print("| per-row accuracy | POSITIVE count error, 12 movies | " + " | ".join(
        f"{task} F1, {m} ({sum(f)}/{len(f)} fresh)" for m, f in movies.items()
        for task in ("same", "opposite")) + " |")  # fmt: skip
    print("|---|---|" + "---|" * 2 * len(movies))
    rng = random.Random(27)
    for p in (0.7, 0.725, 0.75, 0.8, 0.85, 0.9):
        count = statistics.mean(
            _count_error(list(labelled.values()), p, rng) for _ in range(trials)
        )
        cells = [f"{statistics.mean(_pair_f1(f, task == 'same', p, rng) for _ in range(trials // 10)):.2f}"
                 for f in movies.values() for task in ("same", "opposite")]  # fmt: skip
        print(f"| {p:.3f} | {count:.2f} | " + " | ".join(cells) + " |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="llama:?threads=1&share_cpu=off")
    parser.add_argument("--rows", type=int, default=200)
    parser.add_argument("--out", type=Path, help="the rows' scores (JSON)")
    parser.add_argument("--bounds", action="store_true", help="accuracy needed (no model)")
    args = parser.parse_args()
    if args.bounds:
        bounds()
        return
    if args.out is None:
        parser.error("--out FILE (or --bounds)")
    backend = create_backend(args.backend)
    picked = quality_shapes.phrasing_reviews(args.rows)
    texts, labels = [r.text for r in picked], [r.fresh for r in picked]
    print(f"{args.backend}, {len(labels)} held-out reviews, true share "
          f"{sum(labels) / len(labels):.3f}")  # fmt: skip
    print("| phrasing | accuracy at the engine's threshold | ROC AUC | yes share | "
          "accuracy at the best threshold |\n|---|---|---|---|---|")  # fmt: skip
    scores: dict[str, list[float]] = {}
    for source in quality_shapes.PHRASINGS:
        template = parse_template(source)
        requests = [
            build_request(OperatorKind.FILTER, template.render([t]), template=template)
            for t in texts
        ]
        answers, _ = quality_shapes.run_requests(backend, requests)
        got = scores[source] = [a.score or 0.0 for a in answers]
        print(f"| `{source}` | {accuracy(got, labels):.3f} | {auc(got, labels):.3f} | "
              f"{sum(s > 0 for s in got) / len(got):.2f} | "
              f"{best_threshold_accuracy(got, labels):.3f} |", flush=True)  # fmt: skip
        args.out.write_text(json.dumps({"labels": labels, "scores": scores}), encoding="utf-8")


if __name__ == "__main__":
    main()
