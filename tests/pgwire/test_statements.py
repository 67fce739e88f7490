"""Statements as PostgreSQL treats them: one client script against PostgreSQL 15 and the wire.

The same psycopg steps run against the local PostgreSQL (in a scratch schema) and against a
real ``duckdb-sem pgwire``; rows, command tags and SQLSTATEs must be equal step by step.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest
from conftest import PG_DSN, WireProcess, pg_available

from duckdb_sem.pgwire.portals import param_count

pytestmark = pytest.mark.integration

Conn = psycopg.Connection[tuple[Any, ...]]


@dataclass(frozen=True, slots=True)
class Outcome:
    tag: str | None
    rows: list[tuple[Any, ...]] | None
    sqlstate: str | None = None


def _step(conn: Conn, sql: str, params: list[Any] | None, *, ordered: bool) -> Outcome:
    try:
        cur = conn.execute(sql, params)
    except psycopg.Error as err:
        return Outcome(None, None, err.sqlstate)
    rows = cur.fetchall() if cur.description is not None else None
    if rows is not None and not ordered:
        rows = sorted(rows)
    return Outcome(cur.statusmessage, rows)


T = "dsem_diff"
SCRIPT: list[tuple[str, list[Any] | None]] = [
    (f"CREATE TABLE {T} (id INTEGER, v TEXT)", None),
    (f"INSERT INTO {T} VALUES (1, 'a'), (2, 'b')", None),
    (f"INSERT INTO {T} VALUES (7, 'c') RETURNING id", None),
    (f"INSERT INTO {T} SELECT id + 10, v FROM {T} RETURNING id, v", None),
    (f"/* orm */ UPDATE {T} SET v = 'z' WHERE id > 10 RETURNING id, v", None),
    (f"DELETE FROM {T} WHERE id = 17 RETURNING *", None),
    (f"UPDATE {T} SET v = v WHERE id < 0", None),
    (f"DELETE FROM {T} WHERE id = 11", None),
    (f"INSERT INTO {T} VALUES (%s, %s) RETURNING v", [3, "returning"]),
    ("/* tag */ SELECT 42", None),
    ("-- c\nSELECT 42", None),
    ("SELECT $$a;b$$", None),
    ("SELECT E'it\\'s; x'", None),
    ("SELECT 'version()', 'a -- b', 'c /* d */'", None),
    (
        "SELECT INTERVAL '1 day 14 months 90 minutes', INTERVAL '-1 second', INTERVAL '0 seconds'",
        None,
    ),
    (f"PREPARE ins AS INSERT INTO {T} VALUES ($1, $2)", None),
    ("EXECUTE ins(5, 'e')", None),
    (f"PREPARE sel AS SELECT id FROM {T} WHERE id = $1", None),
    ("EXECUTE sel(5)", None),
    ("DEALLOCATE sel", None),
    # savepoints: work after a savepoint undone, work before it kept
    ("BEGIN", None),
    (f"INSERT INTO {T} VALUES (100, 'x')", None),
    ("SAVEPOINT s1", None),
    (f"INSERT INTO {T} VALUES (101, 'x')", None),
    ("ROLLBACK TO SAVEPOINT s1", None),
    (f"INSERT INTO {T} VALUES (102, 'x')", None),
    ("RELEASE SAVEPOINT s1", None),
    ("COMMIT", None),
    # an error, then ROLLBACK TO keeps what came before the savepoint
    ("BEGIN", None),
    (f"INSERT INTO {T} VALUES (200, 'y')", None),
    ("SAVEPOINT s2", None),
    (f"INSERT INTO {T} VALUES (201, 'y')", None),
    ("SELECT * FROM dsem_no_such_table", None),
    ("SELECT 1", None),
    ("ROLLBACK TO s2", None),
    (f"INSERT INTO {T} VALUES (203, 'y')", None),
    ("COMMIT", None),
    # nested savepoints; releasing the outer one drops the inner
    ("BEGIN", None),
    ("SAVEPOINT a", None),
    (f"INSERT INTO {T} VALUES (300, 'w')", None),
    ("SAVEPOINT b", None),
    (f"INSERT INTO {T} VALUES (301, 'w')", None),
    ("RELEASE SAVEPOINT a", None),
    ("ROLLBACK TO SAVEPOINT b", None),
    ("ROLLBACK", None),
    ("BEGIN", None),
    (f"INSERT INTO {T} VALUES (400, 'v')", None),
    ("ROLLBACK", None),
    # one simple Query with several statements is one implicit transaction
    (f"INSERT INTO {T} VALUES (500, 'i'); SELECT * FROM dsem_no_such_table", None),
    (f"INSERT INTO {T} VALUES (501, 'i'); INSERT INTO {T} VALUES (502, 'i')", None),
    ("SAVEPOINT outside", None),
    ("ROLLBACK TO SAVEPOINT outside", None),
    ("COMMIT", None),
    (f"SELECT id, v FROM {T} ORDER BY id", None),
    (f"SELECT count(*) FROM {T}", None),
    (f"DROP TABLE {T}", None),
]


def _run_script(conn: Conn) -> list[Outcome]:
    outcomes = [_step(conn, sql, params, ordered="ORDER BY" in sql) for sql, params in SCRIPT]
    # psycopg's nested transaction(): savepoints with generated names, released or rolled back
    conn.execute(f"CREATE TABLE {T} (id INTEGER)")
    with conn.transaction():
        conn.execute(f"INSERT INTO {T} VALUES (1)")
        with pytest.raises(psycopg.errors.UndefinedTable), conn.transaction():
            conn.execute(f"INSERT INTO {T} VALUES (2)")
            conn.execute("SELECT * FROM dsem_no_such_table")
        with conn.transaction():
            conn.execute(f"INSERT INTO {T} VALUES (3)")
    outcomes.append(_step(conn, f"SELECT id FROM {T} ORDER BY id", None, ordered=True))
    conn.execute(f"DROP TABLE {T}")
    return outcomes


@pytest.fixture
def postgres_outcomes() -> Iterator[list[Outcome]]:
    if not pg_available():
        pytest.skip("no PostgreSQL on 127.0.0.1:5432 (.ci/run starts one)")
    schema = f"dsem_stmt_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        try:
            conn.execute(f"SET search_path TO {schema}")
            yield _run_script(conn)
        finally:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def test_same_rows_and_tags_as_postgresql(
    server: WireProcess, postgres_outcomes: list[Outcome]
) -> None:
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        wire = _run_script(conn)
    steps = [sql for sql, _ in SCRIPT] + ["psycopg nested transaction()"]
    differences = [
        (sql, pg, got)
        for sql, pg, got in zip(steps, postgres_outcomes, wire, strict=True)
        if pg != got
    ]
    assert differences == [], f"{len(differences)} of {len(steps)} steps differ"
    # The script must exercise what it claims: rows back from RETURNING, an undone savepoint.
    assert wire[2] == Outcome("INSERT 0 1", [(7,)])
    assert wire[-1] == Outcome("SELECT 2", [(1,), (3,)])


def test_placeholders_are_counted_outside_strings() -> None:
    assert param_count("SELECT '$1', $2 -- $3") == 2
    assert param_count("SELECT $$ $7 $$") == 0


def test_several_statements_in_one_parse_are_refused(server: WireProcess) -> None:
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        with pytest.raises(psycopg.errors.SyntaxError, match="multiple commands"):
            conn.execute("SELECT %s::INTEGER; DELETE FROM reviews", [2])
        assert conn.execute("SELECT count(*) FROM reviews").fetchone() == (4,)
        # Without parameters psycopg sends a simple query, where several statements are fine.
        cur = conn.execute("SELECT 1; SELECT 2")
        assert cur.fetchall() == [(1,)] and cur.nextset() and cur.fetchall() == [(2,)]


def test_catalog_rewrites_leave_string_constants_alone(server: WireProcess) -> None:
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        row = conn.execute(
            "SELECT 'version() and pg_catalog.format_type(1, 2)', version()"
        ).fetchone()
        assert row is not None
        assert row[0] == "version() and pg_catalog.format_type(1, 2)"
        assert row[1].startswith("PostgreSQL 15")
