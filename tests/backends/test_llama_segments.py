"""A ``llama:`` prompt's segments end on whole row groups after its lead
(``backends/llama_segments.py``), so a join's pairs score bit for bit the same evaluated in
segments or in one piece, whether the KV cache held their first side or not. The model test
runs the embedded default's join model (gemma-3-270m) on pairs of the bundled reviews and
plots; the others are deterministic (a TEST DOUBLE stands for llama.cpp's context)."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence

import numpy as np
import pytest

import duckdb_sem
from duckdb_sem.backends.llama import LlamaBackend
from duckdb_sem.backends.llama_default import DefaultLlamaBackend
from duckdb_sem.backends.llama_model import LoadedModel
from duckdb_sem.backends.llama_segments import (
    MIN_SEGMENT,
    ROW_GROUP,
    eval_segments,
    segment_bounds,
)
from duckdb_sem.backends.registry import create_backend
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import Completion, LLMRequest, OperatorKind
from duckdb_sem.llm.template import parse_template

JOIN = parse_template(
    "Is this review about the movie with this plot? Review: {r.text} Plot: {p.plot}"
).positional()


def test_later_cuts_end_on_whole_row_groups_after_the_lead() -> None:
    # the benchmark's first pair: the lead ends at 340, the review (with " Plot:") at 359
    assert segment_bounds(340, [359], 482) == [0, 340, 356, 482]
    for lead in range(0, 9):
        for cut in range(0, 40):
            bounds = segment_bounds(lead, [cut], 36)
            assert bounds[0] == 0 and bounds[-1] == 36 and bounds == sorted(set(bounds))
            later = [b for b in bounds[1:-1] if b != lead]
            # a cut after the lead is a whole number of row groups after it (a lead of 0 is no
            # lead: the prompt's start), never past where the template put it, never too short
            start = lead if lead in bounds[1:-1] else 0
            assert all((b - start) % ROW_GROUP == 0 and b <= cut for b in later)
            assert all(b - start >= MIN_SEGMENT for b in later)
            if lead < cut < 36 and cut - lead >= MIN_SEGMENT + ROW_GROUP:  # a segment, not lost
                assert cut - ROW_GROUP < later[-1] <= cut
    assert segment_bounds(0, [], 12) == [0, 12]  # nothing shared: one piece
    assert segment_bounds(30, [40], 12) == [0, 12]  # a lead past a truncated prompt: ignored
    assert segment_bounds(340, [345], 351) == [0, 340, 351]  # a 4-token segment: not cut


class _Context:
    """TEST DOUBLE: what ``eval_segments`` uses of llama-cpp-python's ``Llama``: the tokens its
    KV cache holds, and the batches it is asked to evaluate (start and end positions)."""

    def __init__(self) -> None:
        self.input_ids = np.zeros(64, dtype=np.intc)
        self.n_tokens = 0
        self.batches: list[tuple[int, int]] = []

    def eval(self, tokens: Sequence[int]) -> None:
        start = self.n_tokens
        self.input_ids[start : start + len(tokens)] = tokens
        self.n_tokens += len(tokens)
        self.batches.append((start, self.n_tokens))


def _loaded(context: _Context) -> LoadedModel:
    return LoadedModel(llama=context, lock=threading.Lock(), yes_ids=(), no_ids=(),
                       stop_ids=frozenset(), formatter=None)  # fmt: skip


def test_a_cache_is_reused_only_where_it_was_cut_at_the_same_lead() -> None:
    context = _Context()
    model = _loaded(context)
    pair = list(range(1, 41))  # the lead ends at 10, the pair's first side at 23
    sibling = pair[:23] + [99] * 8  # the same first side, another second
    assert eval_segments(model, pair, 10, [23]) == 0
    assert context.batches == [(0, 10), (10, 22), (22, 40)]  # 23 moved back to 10 + 3 x 4
    context.batches.clear()
    assert eval_segments(model, sibling, 10, [23]) == 22  # the lead and the first side reused
    assert context.batches == [(22, 31)]
    # the same tokens held, but cut at another lead: other floats, so nothing is reused
    other = _Context()
    model = _loaded(other)
    assert eval_segments(model, pair, 12, []) == 0
    other.batches.clear()
    assert eval_segments(model, sibling, 10, [23]) == 0
    assert other.batches == [(0, 10), (10, 22), (22, 31)]
    model.kv_lead[0] = -1  # as after generated text: the cache's cuts are unknown
    other.batches.clear()
    assert eval_segments(model, sibling, 10, [23]) == 0 and other.batches[0] == (0, 10)


@pytest.fixture(scope="module")
def join_model() -> Iterator[LlamaBackend]:
    made = create_backend("llama:?threads=2")
    assert isinstance(made, DefaultLlamaBackend)
    yield made.model_for("join")


def _pairs() -> list[LLMRequest]:
    con = duckdb_sem.connect(backend="sim:")
    duckdb_sem.load_demo(con)
    reviews = con.execute("SELECT text FROM reviews ORDER BY review_id LIMIT 2").fetchall()
    plots = con.execute("SELECT left(plot, 600) FROM plots ORDER BY movie LIMIT 2").fetchall()
    con.close()
    return [
        build_request(OperatorKind.JOIN, JOIN.render([r, p]), template=JOIN)
        for (r,) in reviews
        for (p,) in plots
    ]


def _unrelated() -> LLMRequest:
    return build_request(OperatorKind.FILTER, "Is this city in Germany? Lyon.")


@pytest.mark.model
def test_pairs_score_alike_in_segments_cached_or_not_and_in_one_piece(
    join_model: LlamaBackend,
) -> None:
    pairs = _pairs()
    grouped = join_model.complete(pairs)  # a review's second plot reuses the review's KV
    assert [c.cached_tokens > 0 for c in grouped] == [True] * 4
    assert grouped[1].cached_tokens > grouped[0].cached_tokens  # the review was in the cache
    alone: list[Completion] = []
    for pair in pairs:  # each after an unrelated row: nothing of the pair in the cache
        join_model.complete([_unrelated()])
        alone += join_model.complete([pair])
    assert all(c.cached_tokens < grouped[1].cached_tokens for c in alone)
    join_model._pair_cut = lambda *args, **kwargs: []  # type: ignore[method-assign]
    try:  # the layout before segments: the pair in one piece after the instruction and lead
        whole = join_model.complete(pairs)
    finally:
        del join_model._pair_cut

    def evaluated(done: list[Completion]) -> int:
        return sum(c.prompt_tokens - c.cached_tokens for c in done)

    assert evaluated(grouped) < evaluated(whole)  # the reviews' segments were reused
    for one in (alone, whole):
        assert [c.value for c in one] == [c.value for c in grouped]
        assert [c.score for c in one] == [c.score for c in grouped]  # bit for bit
        assert [c.prompt_tokens for c in one] == [c.prompt_tokens for c in grouped]
