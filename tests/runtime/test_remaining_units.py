"""UDF and planned queries put their remaining cost on SEUs in one unit (token-equivalents),
so SRTF compares them: the same work, sent either way, carries a remaining cost of the same
size (within the estimators' disagreement), not figures that differ by a unit."""

from __future__ import annotations

from typing import Any

import duckdb_sem
from duckdb_sem.backends.rules import RuleBackend


class Recorder:
    """A scheduler client that notes each SEU's remaining cost and passes it on."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.remaining: list[float] = []

    def submit(self, seu: Any) -> Any:
        self.remaining.append(seu.remaining_cost)
        return self.inner.submit(seu)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def first_remaining(*, optimize: bool) -> float:
    con = duckdb_sem.connect(backend=RuleBackend(hash_share=0.5), cache="off", optimize=optimize)
    con.execute(
        "CREATE TABLE t AS SELECT range AS id, 'a movie review of some length, number ' "
        "|| range AS txt FROM range(512)"
    )
    recorder = Recorder(con.session.engine.client)
    con.session.engine.client = recorder  # type: ignore[assignment]
    con.sql("SELECT id FROM t WHERE sem_filter('Is this review positive? {txt}')").fetchall()
    con.close()
    return recorder.remaining[0]


def test_udf_and_planned_seus_carry_remaining_cost_in_one_unit() -> None:
    udf, planned = first_remaining(optimize=False), first_remaining(optimize=True)
    assert udf > 0 and planned > 0
    assert 0.5 < udf / planned < 2.0, (udf, planned)
