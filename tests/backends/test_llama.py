"""The embedded llama.cpp backend on SmolLM2-135M alone (``llama:/path``) and real labelled data.

Floors are asserted on held-out rows only: ``tests/data/rt_held_out.csv``, 80 Rotten Tomatoes
reviews outside the 300 bundled ones, which tuned nothing, under a phrasing no few-shot example
uses. Figures behind them (greedy, 1 thread): accuracy 0.675, ROC AUC 0.75, yes-share 0.64
against a true share of 0.56 (content-free calibration alone: 0.61, 0.73, 0.25). The floors leave slack for other CPUs or thread counts; chance is
0.5. The routed default (``llama:``) is tested in test_llama_default.py; the benchmark on
three datasets is benchmarks/bench_embedded_quality.py.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

import pytest

from duckdb_sem.backends.llama import LlamaBackend, default_model_path
from duckdb_sem.backends.registry import create_backend
from duckdb_sem.errors import BackendUnavailableError
from duckdb_sem.llm.canonical import canonical_template
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import Completion, LLMRequest, OperatorKind
from duckdb_sem.llm.template import parse_template

pytestmark = pytest.mark.model

HELD_OUT = Path(__file__).resolve().parent.parent / "data" / "rt_held_out.csv"
ACCURACY_FLOOR = 0.6  # measured 0.675
AUC_FLOOR = 0.65  # measured 0.75
FILTER = parse_template("Is this a favourable review of the film? {text}").positional()


@pytest.fixture(scope="module")
def backend() -> Iterator[LlamaBackend]:
    made = create_backend(f"llama:{default_model_path()}?threads=2")  # SmolLM2 alone
    assert isinstance(made, LlamaBackend)
    yield made


def _reviews() -> list[tuple[str, bool]]:
    with HELD_OUT.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    return [(row["text"], row["fresh"] == "True") for row in rows]


def _auc(scores: list[float], labels: list[bool]) -> float:
    pos = [s for s, lab in zip(scores, labels, strict=True) if lab]
    neg = [s for s, lab in zip(scores, labels, strict=True) if not lab]
    return sum((p > n) + 0.5 * (p == n) for p in pos for n in neg) / (len(pos) * len(neg))


@pytest.mark.slow
def test_filter_on_held_out_reviews(backend: LlamaBackend) -> None:
    reviews = _reviews()
    requests = [
        build_request(OperatorKind.FILTER, FILTER.render([text]), template=FILTER)
        for text, _ in reviews
    ]
    answers = []
    for start in range(0, len(requests), backend.capacity().max_batch):
        answers += backend.complete(requests[start : start + backend.capacity().max_batch])
    labels = [label for _, label in reviews]
    correct = sum(a.value == label for a, label in zip(answers, labels, strict=True))
    assert all(isinstance(a.value, bool) and a.text in ("yes", "no") for a in answers)
    assert all(a.prompt_tokens > 0 and a.completion_tokens == 1 for a in answers)
    assert all(a.score is not None and (a.score > 0) == a.value for a in answers)
    assert correct / len(reviews) >= ACCURACY_FLOOR
    assert _auc([float(a.score or 0.0) for a in answers], labels) >= AUC_FLOOR
    yes = sum(bool(a.value) for a in answers) / len(answers)
    assert 0.1 <= yes <= 0.9  # calibrated per template: neither collapse


def test_calibration_is_per_template(backend: LlamaBackend) -> None:
    texts = ["A joyous, clever delight.", "Tedious and badly acted."]
    other = parse_template("Is the overall verdict of this review favourable? Review: {0}")
    for template in (FILTER, other):
        requests = [
            build_request(OperatorKind.FILTER, template.render([t]), template=template)
            for t in texts
        ]
        backend.complete(requests)
    offsets = {k: v for k, v in backend._calibration.items() if k[3] is not None}
    pieces = {k[3] for k in offsets}
    # one offset per template as it is asked (layout=canonical: "Review: " is dropped)
    asked = {(canonical_template(t) or t).pieces for t in (FILTER, other)}
    assert len(asked) == 2 and asked <= pieces
    assert len({round(v, 6) for v in offsets.values()}) == len(offsets)


def test_scale_and_labels_are_scored_in_one_pass(backend: LlamaBackend) -> None:
    rating = parse_template("Rate the movie review from 1 (awful) to 5 (excellent): {0}")
    reviews = _reviews()[:6]
    requests = [
        build_request(OperatorKind.MAP, rating.render([t]), output_type="INTEGER",
                      template=rating)
        for t, _ in reviews
    ]  # fmt: skip
    answers = backend.complete(requests)
    assert all(a.value in {1, 2, 3, 4, 5} and a.completion_tokens == 1 for a in answers)
    assert all(a.score is not None and 1.0 <= a.score <= 5.0 for a in answers)
    genre = build_request(
        OperatorKind.MAP, "Which genre is this film? A detective hunts a killer in Paris.",
        labels=("crime thriller", "romantic comedy", "animated musical"),
    )  # fmt: skip
    (label,) = backend.complete([genre])
    assert label.value in genre.output.labels and label.error is None
    (flag,) = backend.complete(
        [build_request(OperatorKind.MAP, "Is Paris in France?", output_type="BOOLEAN")]
    )
    assert isinstance(flag.value, bool) and flag.completion_tokens == 1


def test_decisions_are_deterministic_and_cache_independent(backend: LlamaBackend) -> None:
    texts = ["A joyous, clever delight.", "Tedious and badly acted."]
    requests = [
        build_request(OperatorKind.FILTER, f"Is this movie review positive? {t}") for t in texts
    ]
    first = backend.complete(requests)
    again = backend.complete(list(reversed(requests)))[::-1]  # different KV cache history
    assert [c.value for c in first] == [c.value for c in again]
    for a, b in zip(first, again, strict=True):
        assert a.score == pytest.approx(b.score, abs=1e-3)


@pytest.mark.parametrize(
    ("sql_type", "check"),
    [
        ("INTEGER", lambda v: isinstance(v, int) and not isinstance(v, bool)),
        ("BOOLEAN", lambda v: isinstance(v, bool)),
        ("VARCHAR[]", lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v)),
        (
            "STRUCT(year INTEGER, title VARCHAR)",
            lambda v: (
                isinstance(v, dict)
                and set(v) == {"year", "title"}
                and isinstance(v["year"], int)
                and isinstance(v["title"], str)
            ),
        ),
        ("VARCHAR", lambda v: isinstance(v, str) and v != ""),
    ],
)
def test_typed_outputs_parse(backend: LlamaBackend, sql_type: str, check: object) -> None:
    request = build_request(
        OperatorKind.MAP,
        "Titanic is a 1997 film by James Cameron about a ship that sinks. "
        "Give the release year, the title, a few keywords, whether it is a drama.",
        output_type=sql_type,
        max_tokens=48,
    )
    (answer,) = backend.complete([request])
    assert answer.error is None, answer.error
    assert callable(check) and check(answer.value), answer
    assert answer.prompt_tokens > 0 and answer.completion_tokens > 0


def test_token_counts_use_the_tokenizer(backend: LlamaBackend) -> None:
    assert backend.count_tokens("") == 0
    assert 0 < backend.count_tokens("hello world") < backend.count_tokens("hello world " * 10)


def test_backend_id_names_model_and_settings(backend: LlamaBackend) -> None:
    assert "SmolLM2-135M-Instruct" in backend.backend_id
    assert "n_ctx=2048" in backend.backend_id and "few_shot=" in backend.backend_id


def test_bad_model_path_is_unavailable(tmp_path: object) -> None:
    with pytest.raises(BackendUnavailableError, match="does not exist"):
        create_backend("llama:/nonexistent/model.gguf")


def test_unloadable_file_is_unavailable(tmp_path: pytest.TempPathFactory) -> None:
    bogus = tmp_path / "broken.gguf"  # type: ignore[operator]
    bogus.write_bytes(b"not a gguf file")
    with pytest.raises(BackendUnavailableError, match="cannot load"):
        create_backend(f"llama:{bogus}")


def test_abort_stops_between_rows(backend: LlamaBackend) -> None:
    requests = [build_request(OperatorKind.FILTER, f"Is {i} an even number?") for i in range(3)]
    backend.abort(requests)  # not being answered: ignored
    original = backend._decide

    def first_then_abort(request: LLMRequest) -> Completion:
        backend.abort(requests[1:])  # arrives while the first row is evaluated
        return original(request)

    backend._decide = first_then_abort  # type: ignore[method-assign]
    try:
        out = backend.complete(requests)
    finally:
        del backend._decide
    assert out[0].error is None and isinstance(out[0].value, bool)
    assert [c.error for c in out[1:]] == ["aborted", "aborted"]
    again = backend.complete(requests[1:])  # an abort applies to that batch only
    assert all(c.error is None for c in again)


def test_pairs_sharing_a_first_side_reuse_it_and_score_as_alone(backend: LlamaBackend) -> None:
    join = parse_template(
        "Do these two film reviews reach the same verdict? First review: {a.text} "
        "Second review: {b.text}"
    ).positional()
    lefts = ["A joyous, clever delight from start to finish.", "Tedious, shrill and badly acted."]
    rights = ["I loved every minute.", "A chore to sit through.", "Warm and funny."]
    pairs = [
        build_request(OperatorKind.JOIN, join.render([a, b]), template=join)
        for a in lefts
        for b in rights
    ]
    before = (backend.tokens_prompted, backend.tokens_evaluated)
    grouped = backend.complete(pairs)
    prompted = backend.tokens_prompted - before[0]
    evaluated = backend.tokens_evaluated - before[1]
    # each left side once per run of its pairs: a pair after the first evaluates the right only
    assert evaluated < 0.6 * prompted, (evaluated, prompted)
    # and says so per answer (Completion.cached_tokens): a pair after the first of its left
    # side took that side from the cache too
    assert all(0 < c.cached_tokens < c.prompt_tokens for c in grouped)
    assert grouped[1].cached_tokens > grouped[0].cached_tokens
    # scores depend on the pair alone: interleaved, each pair after another left side, and one
    # at a time after an unrelated row, they score the same
    interleaved = [pairs[i] for i in (0, 3, 1, 4, 2, 5)]
    again = backend.complete(interleaved)
    alone = []
    for pair in pairs:
        backend.complete([build_request(OperatorKind.FILTER, "Is this positive? fine")])
        alone += backend.complete([pair])
    for got, other in ((grouped, [again[i] for i in (0, 2, 4, 1, 3, 5)]), (grouped, alone)):
        assert [c.value for c in got] == [c.value for c in other]
        for a, b in zip(got, other, strict=True):
            assert a.score == pytest.approx(b.score, abs=1e-3)
