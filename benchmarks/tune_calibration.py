"""Tuning-row experiments for decision thresholds, rating scales and join layouts (issue 17).

Runs only on the *tuning* rows: bundled reviews 1-100 (``duckdb_sem/data/rt_reviews.csv``) and
their plots, with phrasings of our own that the held-out benchmark does not use. It dumps raw
(uncalibrated) margins of every row and of every candidate calibration row to JSON, so the
calibration strategies can be compared offline without rerunning the model:

    python benchmarks/tune_calibration.py --model gemma --out /tmp/tune_gemma.json
    python benchmarks/tune_calibration.py --analyse /tmp/tune_gemma.json

Not a benchmark: what it chose is then measured on held-out rows by
``bench_embedded_quality.py``.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
from pathlib import Path
from typing import Any

from duckdb_sem.backends.llama import LlamaBackend
from duckdb_sem.backends.llama_model import default_model_path, gemma_model_path
from duckdb_sem.data import dataset_path
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import CALIBRATION_TEXTS, CONTENT_FREE_FILLERS, OperatorKind
from duckdb_sem.llm.template import parse_template

FILTERS = (
    "Is this movie review positive? {0}",
    "Review: {0}\nDoes the critic recommend this film?",
    "Does this review praise the movie? {0}",
)
RATINGS = (
    "How positive is this review, from 1 to 5? {0}",
    "Review: {0}\nScore the critic's opinion on a 1-5 scale.",
)
JOINS = (
    "Does this review talk about the film with this synopsis? Review: {0} Synopsis: {1}",
    "Plot: {1}\nReview: {0}\nIs the review about this plot's movie?",
)

#: the candidate calibration rows compared (the kept ones are in llm.request)
FILLERS: dict[str, list[str]] = {
    "cf": list(CONTENT_FREE_FILLERS),
    "words": [
        "window river paper seven lamp quietly orange build",
        "table cloud yesterday metal green walk simple door",
        "number garden slowly bright stone kitchen letter eight",
        "morning glass carry yellow field pencil under cold",
        "street animal open little wood answer sugar often",
        "button winter north quiet bottle happen circle road",
    ],
    "offdomain": list(CALIBRATION_TEXTS),
}


def tuning_rows() -> list[dict[str, str]]:
    with dataset_path("rt_reviews.csv").open(newline="", encoding="utf-8") as f:
        return [r for r in csv.DictReader(f) if int(r["review_id"]) <= 100]


def plots() -> dict[str, str]:
    with dataset_path("rt_plots.csv").open(newline="", encoding="utf-8") as f:
        return {r["movie"]: r["plot"] for r in csv.DictReader(f)}


def margin(backend: LlamaBackend, source: str, values: list[str], kind: OperatorKind) -> float:
    template = parse_template(source)
    request = build_request(kind, template.render(values), template=template)
    return backend._margin(request, request.row)[0]


def run(model: str, out: Path, fillers: dict[str, list[str]]) -> None:
    path = gemma_model_path() if model == "gemma" else default_model_path()
    backend = LlamaBackend(path=path, n_ctx=2048, threads=1)
    rows = tuning_rows()
    result: dict[str, Any] = {"labels": [r["fresh"] == "True" for r in rows], "filters": {}}
    # the row's values alone: a per-row baseline (domain-conditional PMI, Holtzman et al. 2021)
    result["neutral"] = [margin(backend, "{0}", [r["text"]], OperatorKind.FILTER) for r in rows]
    result["neutral_fillers"] = {
        name: [margin(backend, "{0}", [t], OperatorKind.FILTER) for t in texts]
        for name, texts in fillers.items()
    }
    for source in (
        *FILTERS,
        *(r + "\nIs the answer in the upper half of that scale?" for r in RATINGS),
    ):
        got: dict[str, Any] = {
            "rows": [margin(backend, source, [r["text"]], OperatorKind.FILTER) for r in rows]
        }
        for name, texts in fillers.items():
            got[name] = [margin(backend, source, [t], OperatorKind.FILTER) for t in texts]
        result["filters"][source] = got
        print(source[:50], flush=True)
    all_plots = plots()
    movies = sorted(m for m in all_plots if m in {r["movie"] for r in rows})
    rng = random.Random(7)
    pairs = []
    for r in rows[:40]:
        if r["movie"] not in all_plots:
            continue
        for m in [r["movie"], *rng.sample([x for x in movies if x != r["movie"]], 3)]:
            pairs.append((r["text"], all_plots[m][:600], m == r["movie"]))
    result["join_labels"] = [p[2] for p in pairs]
    result["joins"] = {}
    for source in JOINS:
        got = {"rows": [margin(backend, source, [a, b], OperatorKind.JOIN) for a, b, _ in pairs]}
        for name, texts in fillers.items():
            got[name] = [margin(backend, source, [t, t], OperatorKind.JOIN) for t in texts]
        result["joins"][source] = got
        print(source[:50], flush=True)
    out.write_text(json.dumps(result), encoding="utf-8")


def auc(scores: list[float], labels: list[bool]) -> float:
    pos = [s for s, lab in zip(scores, labels, strict=True) if lab]
    neg = [s for s, lab in zip(scores, labels, strict=True) if not lab]
    return sum((p > n) + 0.5 * (p == n) for p in pos for n in neg) / max(1, len(pos) * len(neg))


def analyse(path: Path) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    for group, labels in (("filters", data["labels"]), ("joins", data["join_labels"])):
        truth = sum(labels) / len(labels)
        for source, got in list(data[group].items()) + (
            [
                (
                    "PMI " + k,
                    {
                        "rows": [a - b for a, b in zip(v["rows"], data["neutral"], strict=True)],
                        **{
                            n: [
                                a - b for a, b in zip(v[n], data["neutral_fillers"][n], strict=True)
                            ]
                            for n in data["neutral_fillers"]
                        },
                    },
                )
                for k, v in data[group].items()
            ]
            if group == "filters"
            else []
        ):
            rows = got["rows"]
            print(
                f"{source[:60]!r} AUC {auc(rows, labels):.3f} true {truth:.2f} "
                f"rows {min(rows):.2f}..{sorted(rows)[len(rows) // 2]:.2f}..{max(rows):.2f}"
            )
            kept = [("cf+offdomain", got["cf"] + got["offdomain"])] if "offdomain" in got else []
            for name, cal in [*got.items(), *kept]:
                if name == "rows":
                    continue
                for how, off in (
                    ("mean", sum(cal) / len(cal)),
                    ("median", sorted(cal)[len(cal) // 2]),
                ):
                    yes = [m > off for m in rows]
                    acc = sum(y == lab for y, lab in zip(yes, labels, strict=True)) / len(rows)
                    print(
                        f"   {name:>10} {how:6} offset {off:6.2f} yes {sum(yes) / len(yes):.2f} acc {acc:.2f}"
                        f"  spread {min(cal):.2f}..{max(cal):.2f}"
                    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="gemma")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--analyse", type=Path)
    parser.add_argument("--fillers", type=Path, help="JSON {name: [texts]}; default: FILLERS")
    args = parser.parse_args()
    if args.analyse:
        analyse(args.analyse)
        return
    fillers = json.loads(args.fillers.read_text(encoding="utf-8")) if args.fillers else FILLERS
    run(args.model, args.out, fillers)


if __name__ == "__main__":
    main()
