"""``sem_topk``'s ranking methods against a labelled judge: orders, call bounds, fallbacks.

The judge (:class:`HiddenScores`, a TEST DOUBLE, not a model) knows a hidden score per item and
answers every kind of ranking request from it, with seeded noise per request text (so a repeated
request gets the same answer, as from a cache): a pointwise decision scores the item, a pair
decision says whether A's score beats B's, a window answer lists the items best first. With
noise 0 every method must return the exact top k; with noise, most of it.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from collections.abc import Iterator, Sequence

import pytest

import duckdb_sem
from duckdb_sem.backends.base import Answers, Backend, Capacity
from duckdb_sem.errors import BindError
from duckdb_sem.llm.rank_prompts import parse_permutation
from duckdb_sem.llm.request import Completion, LLMRequest, OperatorKind, Task
from duckdb_sem.runtime.ranking import LISTWISE_STEP, LISTWISE_WINDOW, call_bound
from duckdb_sem.runtime.sliding_window import sliding_topk, window_bound
from duckdb_sem.runtime.tournament import tournament_bound, tournament_topk

N = 40
SCORES = {f"item{i:02d}": float((i * 17) % N) for i in range(N)}  # a hidden permutation
BEST = sorted(SCORES, key=lambda t: -SCORES[t])


def _noise(text: str, sigma: float) -> float:
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
    return random.Random(seed).gauss(0.0, sigma) if sigma else 0.0


class HiddenScores(Backend):
    """TEST DOUBLE LLM: answers ranking requests from :data:`SCORES` (plus seeded noise).

    ``garble``: window answers are not permutations (every ``garble``-th one is empty text).
    ``first``: every pair decision says A (the one shown first) is better, as a biased model.
    """

    def __init__(self, *, sigma: float = 0.0, garble: int = 0, first: bool = False) -> None:
        self.spec = "hidden-scores-double:"
        self.answers = Answers(kind="hidden-scores-double", model=f"{sigma}/{garble}/{first}")
        self.sigma, self.garble, self.first = sigma, garble, first
        self.asked: list[OperatorKind] = []
        self._windows = 0

    def _score(self, text: str, request: str) -> float:
        return SCORES[text] + _noise(request + text, self.sigma)

    def complete(self, requests: Sequence[LLMRequest]) -> list[Completion]:
        out = []
        for r in requests:
            self.asked.append(r.operator)
            items = re.findall(r"item\d\d", r.row)
            if r.output.task is Task.DECIDE and r.operator is OperatorKind.JOIN:
                a, b = items
                yes = self.first or self._score(a, r.row) > self._score(b, r.row)
                out.append(Completion(yes, "yes" if yes else "no", 1, 1, 1.0 if yes else -1.0))
            elif r.output.task is Task.DECIDE:
                score = self._score(items[0], r.row)
                out.append(Completion(score > N / 2, "yes", 1, 1, score))
            else:
                self._windows += 1
                ranked = sorted(range(len(items)), key=lambda j: -self._score(items[j], r.row))
                text = " > ".join(f"[{j + 1}]" for j in ranked)
                if self.garble and self._windows % self.garble == 0:
                    text = "I cannot rank these."
                out.append(Completion(text, text, 1, len(ranked)))
        return out

    def capacity(self) -> Capacity:
        return Capacity(max_batch=64)

    def count_tokens(self, text: str) -> int:
        return len(text.split())


def _connect(judge: HiddenScores, cache: str = "off") -> duckdb_sem.SemConnection:
    con = duckdb_sem.connect(backend=judge, cache=cache)
    rows = ", ".join(f"({i}, '{t}')" for i, t in enumerate(SCORES))
    con.execute(f"CREATE TABLE items AS SELECT * FROM (VALUES {rows}) t(id, text)")
    return con


def _topk(con: duckdb_sem.SemConnection, k: int, method: str) -> list[str]:
    sql = (f"SELECT text FROM sem_topk('items', {k}, 'Is {{text}} a good one?', "
           f"method := '{method}') ORDER BY sem_rank")  # fmt: skip
    return [r[0] for r in con.sql(sql).fetchall()]


def _ndcg(got: Sequence[str], k: int) -> float:
    """Relevance: the top 10 hidden scores are relevant (graded by place)."""
    rel = {t: 10 - i for i, t in enumerate(BEST[:10])}
    dcg = sum(rel.get(t, 0) / math.log2(i + 2) for i, t in enumerate(got[:k]))
    ideal = sum(rel[t] / math.log2(i + 2) for i, t in enumerate(BEST[:k]))
    return dcg / ideal


@pytest.fixture
def exact() -> Iterator[duckdb_sem.SemConnection]:
    con = _connect(HiddenScores())
    yield con
    con.close()


# -- the algorithms, on a pure judge ------------------------------------------------------------
@pytest.mark.parametrize(("n", "k"), [(1, 1), (2, 1), (5, 5), (7, 3), (33, 10), (64, 4)])
def test_the_tournament_finds_the_exact_top_k_within_its_bound(n: int, k: int) -> None:
    hidden = [(i * 37) % 101 for i in range(n)]
    asked: list[tuple[int, int]] = []

    def better(pairs: Sequence[tuple[int, int]]) -> list[bool | None]:
        asked.extend(pairs)
        return [hidden[a] > hidden[b] for a, b in pairs]

    assert tournament_topk(n, k, better) == sorted(range(n), key=lambda i: -hidden[i])[:k]
    assert len(asked) <= tournament_bound(n, k)
    assert len(asked) >= n - 1  # the winner beat everyone, directly or not


def test_a_tournament_without_answers_keeps_the_earlier_candidate() -> None:
    assert tournament_topk(6, 3, lambda pairs: [None] * len(pairs)) == [0, 1, 2]


@pytest.mark.parametrize(("n", "k"), [(2, 1), (8, 8), (9, 2), (30, 10), (41, 5)])
def test_the_sliding_window_finds_the_exact_top_k_in_exactly_its_bound(n: int, k: int) -> None:
    hidden = [(i * 13) % 47 for i in range(n)]
    windows: list[int] = []

    def rank(ids: Sequence[int]) -> tuple[list[int], bool]:
        windows.append(len(ids))
        return sorted(ids, key=lambda i: -hidden[i]), True

    got, fallbacks = sliding_topk(list(range(n)), k, rank, window=LISTWISE_WINDOW,
                                  step=LISTWISE_STEP)  # fmt: skip
    assert got == sorted(range(n), key=lambda i: -hidden[i])[:k]
    assert fallbacks == 0
    assert len(windows) == window_bound(n, k, window=LISTWISE_WINDOW, step=LISTWISE_STEP)
    assert max(windows) <= LISTWISE_WINDOW


def test_window_answers_are_read_robustly() -> None:
    assert parse_permutation("[3] > [1] > [2]", 3) == ((2, 0, 1), True)
    assert parse_permutation("2 > 2 > 7 > 1", 3) == ((1, 0, 2), False)  # repeat, out of range
    assert parse_permutation("", 3) == ((0, 1, 2), False)
    assert parse_permutation(None, 2) == ((0, 1), False)


def test_call_bounds_are_the_documented_formulas() -> None:
    assert call_bound(None, 30, 10) == call_bound("pointwise", 30, 10) == 30
    assert call_bound("pairwise", 30, 10) == 29 + 9 * 5
    # 8-row windows sliding by 4 settle 4 places a pass: 3 passes over 30, 26 and 22 rows
    assert call_bound("listwise", 30, 10) == 7 + 6 + 5
    assert call_bound("pairwise", 1, 1) == call_bound("listwise", 1, 1) == 0


# -- through SQL, the engine, the scheduler and the cache ---------------------------------------
@pytest.mark.parametrize("method", ["pointwise", "pairwise", "listwise"])
def test_every_method_returns_the_exact_top_k_of_a_consistent_judge(
    exact: duckdb_sem.SemConnection, method: str
) -> None:
    assert _topk(exact, 5, method) == BEST[:5]
    assert exact.stats().llm_calls <= call_bound(method, N, 5)
    assert exact.stats().rank_fallbacks == 0


def test_pairwise_asks_pair_decisions_and_listwise_windows() -> None:
    judge = HiddenScores()
    with _connect(judge) as con:
        _topk(con, 3, "pairwise")
        assert set(judge.asked) == {OperatorKind.JOIN}
        assert len(judge.asked) == con.stats().llm_calls
        judge.asked.clear()
        _topk(con, 3, "listwise")
        assert set(judge.asked) == {OperatorKind.MAP}
        assert len(judge.asked) == call_bound("listwise", N, 3)


@pytest.mark.parametrize("method", ["pairwise", "listwise"])
def test_with_noise_a_method_still_finds_most_of_the_top(method: str) -> None:
    with _connect(HiddenScores(sigma=3.0)) as con:
        got = _topk(con, 10, method)
        assert len(set(got)) == 10
        assert _ndcg(got, 10) > 0.8, got
        assert con.stats().llm_calls <= call_bound(method, N, 10)


def test_a_judge_that_always_prefers_the_first_shown_does_not_pick_the_input_order() -> None:
    with _connect(HiddenScores(first=True)) as con:
        ids = [int(t[4:]) for t in _topk(con, 8, "pairwise")]
    assert ids != list(range(8))
    assert {i % 2 for i in ids} == {0, 1}  # first-round winners from both sides of pairs


def test_a_rerun_is_answered_by_the_cache(tmp_path: object) -> None:
    judge = HiddenScores(sigma=1.0)
    with _connect(judge, cache=f"{tmp_path}/c.sqlite") as con:
        first = _topk(con, 4, "pairwise")
        asked = len(judge.asked)
        assert _topk(con, 4, "pairwise") == first
        assert len(judge.asked) == asked  # nothing asked again
        assert con.stats().cache_hits == con.stats().llm_calls > 0


def test_unreadable_windows_fall_back_and_are_counted() -> None:
    with _connect(HiddenScores(garble=3)) as con:
        got = _topk(con, 4, "listwise")
        calls = call_bound("listwise", N, 4)
        assert con.stats().rank_fallbacks == calls // 3
        assert len(got) == 4 and len(set(got)) == 4  # still a ranking of distinct rows


def test_rows_with_a_null_input_are_not_compared_and_rank_last(
    exact: duckdb_sem.SemConnection,
) -> None:
    exact.execute("INSERT INTO items VALUES (99, NULL)")
    rows = exact.sql(
        "SELECT id, sem_score FROM sem_topk('SELECT * FROM items WHERE id IN (0, 1, 99)', 3, "
        "'{text}', method := 'pairwise') ORDER BY sem_rank"
    ).fetchall()
    assert rows[-1] == (99, None)
    assert [r[0] for r in rows[:2]] == sorted([0, 1], key=lambda i: -SCORES[f"item{i:02d}"])
    assert exact.stats().llm_calls == 1


def test_the_relation_api_takes_the_method(exact: duckdb_sem.SemConnection) -> None:
    rel = exact.table("items").sem_topk("Is {text} a good one?", 3, method="listwise")
    assert "method := 'listwise'" in rel.sql_query()
    assert [r[1] for r in rel.order("sem_rank").fetchall()] == BEST[:3]


def test_explain_semantic_says_the_method_and_its_bound(exact: duckdb_sem.SemConnection) -> None:
    def explain(method: str) -> str:
        sql = f"EXPLAIN SEMANTIC SELECT * FROM sem_topk('items', 10, '{{text}}', method := '{method}')"
        return "\n".join(r[-1] for r in exact.sql(sql).fetchall())

    pairwise = explain("pairwise")
    bound = call_bound("pairwise", N, 10)
    assert "method pairwise (knockout tournament" in pairwise
    assert f"calls ≤ n - 1 + (k - 1)·⌈log2 n⌉ = {bound} for n = 40 rows" in pairwise
    listwise = explain("listwise")
    assert f"= {call_bound('listwise', N, 10)} for n = 40 rows" in listwise
    assert "calls≈" in listwise  # the dry run's estimate is there too
    assert exact.stats().llm_calls == 0


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT * FROM sem_topk('items', 3, '{text}', method := 'bubble')",
         "method := 'bubble' is not a ranking method"),
        ("SELECT * FROM items WHERE sem_filter('{text}', method := 'pairwise')",
         "method := chooses how sem_topk ranks rows and applies only to it"),
    ],
)  # fmt: skip
def test_a_bad_method_fails_before_any_call(sql: str, message: str) -> None:
    judge = HiddenScores()
    with _connect(judge) as con, pytest.raises(BindError, match=re.escape(message)):
        con.sql(sql).fetchall()
    assert judge.asked == []
