"""DuckDB habits carry over: relations from any source have the semantic methods, a cursor
has the functions, ``duckdb_sem.sql()`` works like ``duckdb.sql()``, columns are named as
DuckDB names them."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

import duckdb_sem
from duckdb_sem.backends.rules import RuleBackend


@pytest.fixture
def oracle() -> RuleBackend:
    return RuleBackend(hash_share=0.5)


@pytest.fixture
def con(oracle: RuleBackend) -> duckdb_sem.SemConnection:
    c = duckdb_sem.connect(backend=oracle, cache="off")
    c.execute("CREATE TABLE t AS SELECT range AS id, 'row ' || range AS txt FROM range(100)")
    return c


def test_read_csv_and_values_return_semantic_relations(
    con: duckdb_sem.SemConnection, oracle: RuleBackend, tmp_path: Path
) -> None:
    path = tmp_path / "t.csv"
    con.duckdb.execute(f"COPY t TO '{path}' (HEADER)")
    kept = con.read_csv(str(path)).sem_filter("Is {txt} fine?").fetchall()
    expected = con.sql("SELECT id, txt FROM t WHERE sem_filter('Is {txt} fine?')").fetchall()
    assert sorted(kept) == sorted(expected) and 20 < len(kept) < 80
    assert isinstance(con.values([1, "a"]), duckdb_sem.SemRelation)


def test_filter_with_a_semantic_call_on_a_query_is_lazy_and_planned(
    con: duckdb_sem.SemConnection, oracle: RuleBackend
) -> None:
    rel = con.sql("SELECT id, txt FROM t WHERE id < 60").filter("sem_filter('Is {txt} fine?')")
    assert oracle.calls == 0
    rows = rel.fetchall()
    assert oracle.calls == 60
    assert sorted(rows) == sorted(
        con.sql("SELECT id, txt FROM t WHERE id < 60 AND sem_filter('Is {txt} fine?')").fetchall()
    )


def test_a_cursor_has_the_functions_and_its_own_session(
    con: duckdb_sem.SemConnection, oracle: RuleBackend
) -> None:
    cur = con.cursor()
    assert cur.sql("SELECT id FROM t WHERE sem_filter('{txt}?') LIMIT 3").fetchall()
    cur.close()  # releases only the cursor's share of the scheduler
    assert con.sql("SELECT sem_map('x {0}', 'b') AS m").fetchall() == [("x b",)]


def test_planned_results_are_named_as_duckdb_names_them(con: duckdb_sem.SemConnection) -> None:
    counted = con.sql("SELECT count(*) FROM t WHERE sem_filter('{txt}?')")
    assert counted.columns == duckdb.sql("SELECT count(*) FROM range(3)").columns
    rel = con.sql("SELECT id + 1, upper(txt), sem_map('{txt} short') FROM t LIMIT 1")
    assert rel.columns == ["(id + 1)", "upper(txt)", "sem_map('{txt} short')"]
    assert list(rel.df().columns) == rel.columns


def test_module_level_sql_uses_the_default_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DUCKDB_SEM_BACKEND", "test:?hash=0.5")
    monkeypatch.setattr(duckdb_sem, "_default", None)
    rows = duckdb_sem.sql("SELECT sem_map('echo {0}', 'hi') AS m").fetchall()
    assert rows == [("echo hi",)]
    assert duckdb_sem.default_connection() is duckdb_sem.default_connection()


@pytest.mark.parametrize("optimize", [True, False])
def test_fetchone_then_fetchall_reads_on_through_one_stream(optimize: bool) -> None:
    con = duckdb_sem.connect(backend=RuleBackend(hash_share=0.5), cache="off", optimize=optimize)
    con.execute("CREATE TABLE t AS SELECT range AS id, 'row ' || range AS txt FROM range(100)")
    sql = "SELECT id FROM t WHERE sem_filter('Is {txt} fine?') ORDER BY id"
    everything = con.sql(sql).fetchall()
    rel = con.sql(sql)
    first, more, rest = rel.fetchone(), rel.fetchmany(2), rel.fetchall()
    assert [first, *more, *rest] == everything
    assert rel.fetchall() == everything  # a finished stream: the next fetch runs it again
