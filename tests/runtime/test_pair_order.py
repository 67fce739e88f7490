"""A semantic join asks its pairs grouped by the template's first field (``runtime.pair_order``):
every pair of one first value arrives in one run at the backend, with ``order_pairs`` on, and the
answers are the same either way (nested loop and blocked join). TEST DOUBLES: a recording rule
backend, the keyword embedder and same-topic judge of ``embed_doubles``."""

from __future__ import annotations

import dataclasses
import itertools
import threading
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
from embed_doubles import KeywordEmbedder, SameTopicJudge, topic_tables

import duckdb_sem
from duckdb_sem.backends.rules import RuleBackend
from duckdb_sem.llm.request import Completion, LLMRequest, OperatorKind
from duckdb_sem.plan.expressions import SemCall
from duckdb_sem.runtime.pair_order import first_field, order_pairs_sql, order_pairs_table

TEMPLATE = "Review: {r.text} Plot: {p.plot}"  # a left column first: DuckDB emits right-row runs
QUERY = f"SELECT r.id, p.pid FROM r JOIN p ON sem_join('{TEMPLATE}')"


class Recording(RuleBackend):
    """TEST DOUBLE: the ``hash`` rule backend that also records each pair's first side in the
    order the requests reach it."""

    def __init__(self) -> None:
        super().__init__(hash_share=0.4)
        self.first_sides: list[str] = []
        self._seen = threading.Lock()

    def complete(self, requests: Sequence[LLMRequest]) -> list[Completion]:
        with self._seen:
            self.first_sides += [r.first_side() or "" for r in requests]
        return super().complete(requests)


def _open(backend: Recording, *, order: bool) -> duckdb_sem.SemConnection:
    con = duckdb_sem.connect(backend=backend, cache="off")
    con.execute("CREATE TABLE r AS SELECT i AS id, 'review ' || i AS text FROM range(12) t(i)")
    con.execute("CREATE TABLE p AS SELECT i AS pid, 'plot ' || i AS plot FROM range(4) t(i)")
    con.runtime = dataclasses.replace(con.runtime_options(), order_pairs=order)
    return con


def _runs(sides: list[str]) -> int:
    """How many runs of equal first sides the backend saw."""
    return sum(1 for _ in itertools.groupby(sides))


def test_pairs_of_one_first_value_reach_the_backend_in_one_run() -> None:
    backend = Recording()
    con = _open(backend, order=True)
    con.sql(QUERY).fetchall()
    assert len(backend.first_sides) == 48
    assert _runs(backend.first_sides) == 12  # one run per review, 4 pairs each
    con.close()


def test_unordered_pairs_are_scattered() -> None:
    # what order_pairs fixes: the cross product's batches hold one plot against every review
    backend = Recording()
    con = _open(backend, order=False)
    con.sql(QUERY).fetchall()
    assert len(backend.first_sides) == 48
    assert _runs(backend.first_sides) > 12
    con.close()


def test_answers_are_the_same_ordered_or_not() -> None:
    answers = []
    for order in (True, False):
        con = _open(Recording(), order=order)
        answers.append(sorted(con.sql(QUERY).fetchall()))
        assert con.stats().llm_calls == 48
        con.close()
    assert answers[0] == answers[1]
    assert 0 < len(answers[0]) < 48  # the hash rule says yes to some pairs, not all


def test_first_field_is_the_template_s_first_not_the_first_argument() -> None:
    call = SemCall("Plot: {1} Review: {0}", ("r.text", "p.plot"), OperatorKind.JOIN)
    assert first_field(call) == "p.plot"
    assert order_pairs_sql("SELECT 1", call).endswith('ORDER BY "p.plot"::VARCHAR')
    one_field = SemCall("{0} is a good plot", ("p.plot",), OperatorKind.JOIN)
    assert first_field(one_field) is None and order_pairs_sql("SELECT 1", one_field) == "SELECT 1"
    assert first_field(dataclasses.replace(call, kind=OperatorKind.FILTER)) is None


def test_blocked_pairs_are_sorted_by_the_rendered_first_field_stably() -> None:
    call = SemCall("{0} and {1}", ("l.n", "r.t"), OperatorKind.JOIN)
    pairs = pa.table({"l.n": [10, 2, 10, None, 2], "r.t": ["a", "b", "c", "d", "e"]})
    ordered = order_pairs_table(pairs, call)
    # by the text a value renders as ('10' < '2'), equal values in their old order, NULL last
    assert ordered.column("l.n").to_pylist() == [10, 10, 2, 2, None]
    assert ordered.column("r.t").to_pylist() == ["a", "c", "b", "e", "d"]


def test_a_blocked_join_answers_the_same_ordered_or_not(tmp_path: Path) -> None:
    query = "SELECT l.id, r.rid FROM l JOIN r ON sem_join('{r.body} is about {l.txt}')"
    answers, asked = [], []
    for order in (True, False):
        judge = SameTopicJudge()
        con = duckdb_sem.connect(backend=judge, cache=str(tmp_path / f"{order}.sqlite"),
                                 embed_backend=KeywordEmbedder([f"w{i}" for i in range(10)]),
                                 approximate=True, join_recall=0.9)  # type: ignore[arg-type]  # fmt: skip
        topic_tables(con, 10, 300)
        con.runtime = dataclasses.replace(con.runtime_options(), order_pairs=order)
        assert "BLOCKED cosine >= " in con.explain_semantic(query)
        answers.append(sorted(con.sql(query).fetchall()))
        asked.append(con.stats().llm_calls)
        con.close()
    assert answers[0] == answers[1] and len(answers[0]) > 100
    assert asked[0] == asked[1] < 3000  # blocked: far fewer than the 3,000 pairs
