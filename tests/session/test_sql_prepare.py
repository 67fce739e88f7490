"""SQL-level ``PREPARE``/``EXECUTE`` of a statement with ``{column}`` templates (issue 44):
DuckDB would run the UDFs unbound; the session runs the prepared text with the arguments as
its parameters. Plain statements stay DuckDB's own."""

from __future__ import annotations

import duckdb
import pytest

import duckdb_sem

POSITIVE = "sem_filter('{text} is positive')"  # the rule backend: yes for rows saying good


@pytest.fixture
def con() -> duckdb_sem.SemConnection:
    con = duckdb_sem.connect(backend="test:?yes_if=good", cache="off")
    con.execute("CREATE TABLE r AS SELECT * FROM (VALUES (1, 'a good film'), (2, 'dull'), "
                "(3, 'good acting')) v(id, text)")  # fmt: skip
    return con


def test_execute_of_a_prepared_semantic_select(con: duckdb_sem.SemConnection) -> None:
    con.execute(f"PREPARE p AS SELECT id FROM r WHERE {POSITIVE} ORDER BY id")
    assert con.execute("EXECUTE p").fetchall() == [(1,), (3,)]
    assert con.sql("EXECUTE p").fetchall() == [(1,), (3,)]


def test_execute_passes_its_arguments_as_parameters(con: duckdb_sem.SemConnection) -> None:
    con.execute(f"PREPARE q (INTEGER) AS SELECT id FROM r WHERE id > $1 AND {POSITIVE}")
    assert con.execute("EXECUTE q(1)").fetchall() == [(3,)]
    assert con.execute("EXECUTE q(0)").fetchall() == [(1,), (3,)]


def test_a_prepared_semantic_write(con: duckdb_sem.SemConnection) -> None:
    con.execute("CREATE TABLE kept (id INTEGER)")
    con.execute(f"PREPARE w AS INSERT INTO kept SELECT id FROM r WHERE {POSITIVE}")
    con.execute("EXECUTE w")
    assert con.execute("SELECT id FROM kept ORDER BY id").fetchall() == [(1,), (3,)]


def test_deallocate_forgets_it_as_duckdb_does(con: duckdb_sem.SemConnection) -> None:
    con.execute(f"PREPARE p AS SELECT id FROM r WHERE {POSITIVE}")
    con.execute("DEALLOCATE p")
    with pytest.raises(duckdb.Error, match="does not exist"):
        con.execute("EXECUTE p")


def test_plain_prepared_statements_stay_duckdbs(con: duckdb_sem.SemConnection) -> None:
    con.execute("PREPARE z AS SELECT $1 + 1")
    assert con.execute("EXECUTE z(41)").fetchall() == [(42,)]
