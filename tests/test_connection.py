"""End to end through SemConnection with the deterministic rule backend."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path

import duckdb
import pytest

import duckdb_sem
from duckdb_sem.backends.base import Backend, Capacity
from duckdb_sem.backends.rules import RuleBackend
from duckdb_sem.errors import QueryCancelledError, UnknownColumnError
from duckdb_sem.llm.request import Completion, LLMRequest


def test_filter_in_where_select_and_case(con: duckdb_sem.SemConnection) -> None:
    where = con.sql("SELECT id FROM reviews WHERE sem_filter('{text} is positive') ORDER BY id")
    assert where.fetchall() == [(1,), (3,)]
    select = con.sql("SELECT id, sem_filter('{text} is positive') FROM reviews ORDER BY id")
    assert select.fetchall() == [(1, True), (2, False), (3, True), (4, None), (5, False)]
    case = con.sql(
        "SELECT id, CASE WHEN sem_filter('{text} is positive') THEN 'up' ELSE 'down' END "
        "FROM reviews WHERE text IS NOT NULL ORDER BY id"
    )
    assert [r[1] for r in case.fetchall()] == ["up", "down", "up", "down"]


def test_relational_predicates_limit_llm_work(
    con: duckdb_sem.SemConnection, rules: RuleBackend
) -> None:
    con.sql("SELECT id FROM reviews WHERE genre = 'comedy' AND sem_filter('{text} ok')").fetchall()
    assert rules.calls == 1  # only 'great fun': the NULL text and the dramas cost nothing


def test_typed_maps(con: duckdb_sem.SemConnection) -> None:
    row = con.sql(
        "SELECT sem_map('{text}'), sem_map('{text}', 'INTEGER'), sem_map('{text}', 'DOUBLE'), "
        "sem_map('{text}', 'BOOLEAN'), sem_map('{text}', 'VARCHAR[]'), "
        "sem_map('{text}', 'STRUCT(n INTEGER, words VARCHAR[])') FROM reviews WHERE id = 1"
    ).fetchall()[0]
    assert row == (
        "a good film",
        11,
        1.1,
        True,
        ["a", "good", "film"],
        {"n": 11, "words": ["a", "good", "film"]},
    )
    con.execute("SELECT sem_map('{text}', 'INTEGER') AS n FROM reviews WHERE id = 1")
    assert str(con.description[0][1]) == "INTEGER"


def test_join_in_on_and_where(con: duckdb_sem.SemConnection) -> None:
    on = con.sql(
        "SELECT r.id, m.mid FROM reviews r JOIN movies m ON sem_join('{r.text} / {m.genre}') ORDER BY 1, 2"
    ).fetchall()
    where = con.sql(
        "SELECT r.id, m.mid FROM reviews r, movies m WHERE sem_join('{r.text} / {m.genre}') ORDER BY 1, 2"
    ).fetchall()
    assert on == where == [(1, 1), (1, 2), (3, 1), (3, 2)]


def test_agg_grouped_and_whole_table(con: duckdb_sem.SemConnection) -> None:
    grouped = con.sql(
        "SELECT genre, sem_agg('Summarize {text}') FROM reviews GROUP BY genre ORDER BY genre"
    ).fetchall()
    # The rule backend answers with the first five words of the prompt: a record a line.
    assert grouped == [("comedy", "Summarize - great fun"), ("drama", "Summarize - a good film")]
    ((whole,),) = con.sql("SELECT sem_agg('All: {text}') FROM reviews").fetchall()
    assert whole == "All: - a good film"


def test_rerun_makes_zero_llm_calls(tmp_path: Path) -> None:
    backend = RuleBackend(yes_if=["good"])
    sql = "SELECT sem_filter('{0} ok', x) FROM (VALUES ('good'), ('bad'), ('good day')) t(x)"
    first = duckdb_sem.connect(backend=backend, cache=str(tmp_path / "cache.sqlite"))
    first.execute(sql).fetchall()
    assert first.stats().physical_calls == 3 and backend.calls == 3
    second = duckdb_sem.connect(backend=backend, cache=str(tmp_path / "cache.sqlite"))
    assert second.execute(sql).fetchall() == [(True,), (False,), (True,)]
    stats = second.stats()
    assert (stats.physical_calls, stats.cache_hits, stats.llm_calls) == (0, 3, 3)
    assert backend.calls == 3


def test_identical_calls_within_a_query_run_once(
    con: duckdb_sem.SemConnection, rules: RuleBackend
) -> None:
    con.sql(
        "SELECT id, sem_filter('{text} ok') FROM reviews WHERE sem_filter('{text} ok') "
        "UNION ALL SELECT id, sem_filter('{text} ok') FROM reviews"
    ).fetchall()
    assert rules.calls == 4  # four non-NULL texts, each asked once
    stats = con.stats()
    assert stats.physical_calls == 4 and stats.llm_calls > 4 and stats.deduplicated > 0


def test_virtual_and_physical_counters(con: duckdb_sem.SemConnection) -> None:
    con.sql("SELECT sem_map('{text}', 'INTEGER') FROM reviews").fetchall()
    s = con.stats()
    assert s.llm_calls == 4 and s.physical_calls == 4 and s.cache_hits == 0
    assert s.prompt_tokens == s.physical_prompt_tokens > 0
    assert s.completion_tokens == s.physical_completion_tokens > 0


def test_binding_errors_cost_no_llm_call(con: duckdb_sem.SemConnection, rules: RuleBackend) -> None:
    with pytest.raises(UnknownColumnError, match="unknown column"):
        con.sql("SELECT sem_filter('{txt} ok') FROM reviews")
    assert rules.calls == 0


def test_install_on_a_plain_connection(rules: RuleBackend) -> None:
    db = duckdb.connect()
    session = duckdb_sem.install(db, backend=rules)
    rows = db.sql(
        "SELECT sem_filter('{0} and {1}', a, b), sem_map_integer('{0}', a), sem_map_list('{0}', b) "
        "FROM (VALUES ('good', 'x y'), ('bad', 'z')) t(a, b)"
    ).fetchall()
    assert rows == [(True, 4, ["x", "y"]), (False, 3, ["z"])]
    assert session.query.stats().physical_calls == 6


def test_named_fields_in_a_plain_connection_explain_the_fix(rules: RuleBackend) -> None:
    db = duckdb.connect()
    duckdb_sem.install(db, backend=rules)
    with pytest.raises(duckdb.Error, match="not bound"):
        db.sql("SELECT sem_filter('{a} ok') FROM (VALUES ('x')) t(a)").fetchall()


class _Garbled(Backend):
    """Answers every typed request with output that does not parse."""

    spec = "garbled:"
    backend_id = "garbled"

    def complete(self, requests: Sequence[LLMRequest]) -> list[Completion]:
        return [
            Completion(None, "???", 3, 1, error="expected a number, got '???'") for _ in requests
        ]

    def capacity(self) -> Capacity:
        return Capacity(max_batch=8)

    def count_tokens(self, text: str) -> int:
        return len(text.split())


def test_unparseable_output_is_null_with_a_counted_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    con = duckdb_sem.connect(backend=_Garbled(), cache="off")
    rows = con.sql("SELECT sem_map('{0}', x, 'INTEGER') FROM (VALUES ('a'), ('b')) t(x)").fetchall()
    assert rows == [(None,), (None,)]
    assert con.stats().null_outputs == 2
    assert "unparseable model output" in caplog.text


class _Slow(RuleBackend):
    def complete(self, requests: Sequence[LLMRequest]) -> list[Completion]:
        time.sleep(0.2)
        return super().complete(requests)


def test_interrupt_stops_llm_work() -> None:
    backend = _Slow(max_batch=1)
    con = duckdb_sem.connect(backend=backend, cache="off", batch_size=1)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            con.sql("SELECT sem_filter('{0} ok', i::VARCHAR) FROM range(200) t(i)").fetchall()
        except BaseException as err:  # noqa: BLE001
            errors.append(err)

    worker = threading.Thread(target=run)
    worker.start()
    # interrupted while it runs (an interrupt between statements does nothing): after its first
    # call, not after a fixed 0.5 s that a loaded machine may spend before the query starts
    deadline = time.monotonic() + 60
    while backend.calls == 0 and worker.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    con.interrupt()
    worker.join(timeout=10)
    assert not worker.is_alive()
    assert errors and isinstance(errors[0], (QueryCancelledError, duckdb.InterruptException))
    assert 0 < backend.calls < 20


def test_filter_on_a_map_alias_runs_on_the_planned_path(con: duckdb_sem.SemConnection) -> None:
    rows = con.sql(
        "SELECT id, sem_map('{text}') AS gist FROM reviews WHERE sem_filter('{gist} ok') ORDER BY id"
    ).fetchall()
    assert rows == [(1, "a good film"), (3, "great fun")]


def test_arrow_after_execute_works_on_both_paths(con: duckdb_sem.SemConnection) -> None:
    # planned path, then the UDF path (a CTE is not planned): no DuckDB copy warning leaks out
    planned = con.execute(
        "SELECT id FROM reviews WHERE sem_filter('{text} ok') ORDER BY id"
    ).arrow()
    udf = con.execute(
        "WITH r AS (SELECT * FROM reviews) SELECT id FROM r WHERE sem_filter('{text} ok') ORDER BY id"
    ).arrow()
    assert planned.column("id").to_pylist() == udf.column("id").to_pylist() == [1, 3]
