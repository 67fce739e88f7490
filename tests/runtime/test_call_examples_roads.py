"""``examples :=`` and ``batch_size :=`` on every road: planned statements (``connect()``), the
UDF road (``install(con)``) and the relation API. A recording ``test:`` backend shows what was
asked: the call's examples in every request's instruction, a separate cache entry per set of
examples, and SEUs cut at the call's batch size with the same answers."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import duckdb

import duckdb_sem
from duckdb_sem.backends.rules import RuleBackend
from duckdb_sem.llm.request import Completion, LLMRequest

ROWS = ["good film", "bad film", "good day", "dull plot", "good cast"]
NICE = [r for r in ROWS if "good" in r]
LOVELY = "examples := [{'input': 'lovely', 'output': 'yes'}, {'input': 'awful', 'output': 'no'}]"
GRIM = "examples := [{'input': 'grim', 'output': 'no'}]"


class _Recording(RuleBackend):
    """Says yes to rows with 'good'; keeps the instruction of every request it answers."""

    def __init__(self) -> None:
        super().__init__(spec="test:?yes_if=good", yes_if=("good",))
        self.prefixes: list[str] = []

    def complete(self, requests: Sequence[LLMRequest]) -> list[Completion]:
        self.prefixes.extend(r.prefix for r in requests)
        return super().complete(requests)


def _filter(where: str) -> str:
    return f"SELECT x FROM t WHERE sem_filter('Is it nice? {{x}}'{where}) ORDER BY x"


def _table(con: duckdb.DuckDBPyConnection | duckdb_sem.SemConnection) -> None:
    con.execute("CREATE TABLE t (x VARCHAR)")
    con.executemany("INSERT INTO t VALUES (?)", [(r,) for r in ROWS])


def test_planned_road_sends_the_examples_and_keys_the_cache_by_them(tmp_path: Path) -> None:
    backend = _Recording()
    con = duckdb_sem.connect(backend=backend, cache=str(tmp_path / "cache.db"))
    _table(con)
    assert [r[0] for r in con.sql(_filter(", " + LOVELY)).fetchall()] == sorted(NICE)
    assert len(backend.prefixes) == len(ROWS)
    assert all(
        "Input: lovely\nAnswer: yes\nInput: awful\nAnswer: no" in p for p in backend.prefixes
    )
    con.sql(_filter(", " + LOVELY)).fetchall()
    assert con.stats().physical_calls == 0  # the same examples: answered from the cache
    assert con.stats().cache_hits == len(ROWS)
    con.sql(_filter(", " + GRIM)).fetchall()
    assert con.stats().physical_calls == len(ROWS)  # other examples never share an answer
    assert "Input: grim" in backend.prefixes[-1] and "lovely" not in backend.prefixes[-1]
    explained = "\n".join(
        r[0]
        for r in con.sql(
            "EXPLAIN SEMANTIC VERBOSE " + _filter(", " + GRIM + ", batch_size := 2")
        ).fetchall()
    )
    assert "examples := [{'input': 'grim', 'output': 'no'}], batch_size := 2" in explained
    assert "Input: grim" in explained  # the prompt as sent
    con.close()


def test_planned_road_batch_size_cuts_seus_not_answers() -> None:
    con = duckdb_sem.connect(backend=_Recording(), cache="off")
    _table(con)
    whole = con.sql(_filter("")).fetchall()
    assert con.stats().seus == 1
    cut = con.sql(_filter(", batch_size := 2")).fetchall()
    assert cut == whole and con.stats().seus == 3  # 5 rows as SEUs of 2, 2 and 1
    con.close()


def test_udf_road_takes_both_options() -> None:
    backend = _Recording()
    con = duckdb.connect()
    session = duckdb_sem.install(con, backend=backend, cache="off")
    _table(con)
    sql = (
        f"SELECT x, sem_filter('Is it nice? {{0}}', x, {LOVELY}, batch_size := 2) FROM t ORDER BY x"
    )
    session.new_query()
    rows = con.sql(sql).fetchall()
    assert rows == sorted((r, "good" in r) for r in ROWS)
    assert session.query.stats().seus == 3
    assert all("Input: lovely" in p for p in backend.prefixes)
    mapped = con.sql(
        "SELECT sem_map('{0} upper', x, examples := [{'input': 'ab', 'output': 'AB'}]) FROM t"
    ).fetchall()
    assert len(mapped) == len(ROWS) and "Input: ab\nAnswer: AB" in backend.prefixes[-1]
    con.close()


def test_relation_api_takes_examples_and_batch_size() -> None:
    backend = _Recording()
    con = duckdb_sem.connect(backend=backend, cache="off")
    _table(con)
    rel = con.table("t").sem_filter(
        "Is it nice? {x}", examples=[("lovely", True), {"input": "awful", "output": "no"}],
        batch_size=2,
    )  # fmt: skip
    assert sorted(r[0] for r in rel.fetchall()) == sorted(NICE)
    assert con.stats().seus == 3
    assert all(
        "Input: lovely\nAnswer: yes\nInput: awful\nAnswer: no" in p for p in backend.prefixes
    )
    con.close()
