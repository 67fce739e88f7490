"""SQLSTATEs and command tags as PostgreSQL 15's: a table of cases run against both.

Each case is a few statements on one session (or two, for a conflict); what is compared is the
command tag of each statement, or its SQLSTATE when it fails. Clients act on both: retry loops
on 40001, "create if missing" on 42P07, ORMs parse ``INSERT 0 n`` and ``UPDATE n``. Malformed
protocol messages are sent raw to both servers and must get 08P01 and a closed connection.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterator
from typing import Any

import duckdb
import psycopg
import pytest
import wire_raw
from conftest import PG_DSN, WireProcess, pg_available

from duckdb_sem.pgwire.sqlstate import describe_error

pytestmark = pytest.mark.integration

T = "dsem_codes"
#: name -> statements, run in order on one session (autocommit; BEGIN opens a transaction)
CASES: dict[str, list[str]] = {
    "duplicate table": [f"CREATE TABLE {T} (id INTEGER PRIMARY KEY, v TEXT)"] * 2,
    "duplicate view": [f"CREATE VIEW {T}_v AS SELECT 1 AS x"] * 2 + [f"DROP VIEW {T}_v"],
    "duplicate schema": [f"CREATE SCHEMA {T}_s"] * 2 + [f"DROP SCHEMA {T}_s"],
    "undefined table": ["SELECT * FROM dsem_no_such_table", "DROP TABLE dsem_no_such_table"],
    "undefined column": [f"CREATE TABLE {T} (id INTEGER)", f"SELECT nope FROM {T}"],
    "undefined function": ["SELECT dsem_no_such_function(1)"],
    "syntax": ["SELEC 1"],
    "bad text": ["SELECT 'abc'::integer"],
    "out of range": ["SELECT 2147483647::integer + 1"],
    # not ``1 / 0``: DuckDB's ``/`` divides as floats (Infinity); docs/pgwire.md says so
    "division by zero": ["SELECT 1 % 0"],
    "unique violation": [
        f"CREATE TABLE {T} (id INTEGER PRIMARY KEY)",
        f"INSERT INTO {T} VALUES (1)",
        f"INSERT INTO {T} VALUES (1)",
    ],
    "not null violation": [
        f"CREATE TABLE {T} (id INTEGER NOT NULL)",
        f"INSERT INTO {T} VALUES (NULL)",
    ],
    "transaction tags": [
        "START TRANSACTION",
        "COMMIT",
        "START TRANSACTION ISOLATION LEVEL REPEATABLE READ",
        "ROLLBACK",
        "BEGIN WORK",
        "END",
        "BEGIN ISOLATION LEVEL SERIALIZABLE",
        "SELECT 1 % 0",
        "SELECT 1",
        "COMMIT",
        "ROLLBACK",
    ],
    "session tags": [
        "SHOW TimeZone",
        "SHOW search_path",
        "SET application_name = 'codes'",
        "RESET application_name",
        "DISCARD ALL",
    ],
    "ddl and dml tags": [
        f"CREATE TABLE {T} (id INTEGER, v TEXT)",
        f"INSERT INTO {T} VALUES (1, 'a'), (2, 'b')",
        f"UPDATE {T} SET v = 'c'",
        f"DELETE FROM {T} WHERE id = 1",
        f"CREATE INDEX {T}_i ON {T} (id)",
        f"DROP INDEX {T}_i",
        f"ALTER TABLE {T} ADD COLUMN w INTEGER",
        f"CREATE VIEW {T}_v AS SELECT id FROM {T}",
        f"DROP VIEW {T}_v",
        f"TRUNCATE {T}",
        "VALUES (1), (2)",
        f"PREPARE {T}_p AS SELECT 1",
        f"EXECUTE {T}_p",
        "DEALLOCATE ALL",
    ],
}


def _run(conn: psycopg.Connection[Any], statements: list[str]) -> list[str]:
    out = []
    for sql in statements:
        try:
            cur = conn.execute(sql.encode())
            out.append(cur.statusmessage or "")
        except psycopg.Error as err:
            out.append(f"ERROR {err.sqlstate}")
    return out


@pytest.fixture(scope="module")
def pg_schema() -> Iterator[str]:
    if not pg_available():
        pytest.skip("no PostgreSQL on 127.0.0.1:5432 (.ci/run starts one)")
    schema = f"dsem_codes_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}".encode())
        try:
            yield schema
        finally:
            conn.execute(f"DROP SCHEMA {schema} CASCADE".encode())


def _cleanup(conn: psycopg.Connection[Any]) -> None:
    conn.execute(f"DROP TABLE IF EXISTS {T}".encode())


@pytest.mark.parametrize("case", list(CASES))
def test_codes_and_tags_as_postgresql(pg_schema: str, server: WireProcess, case: str) -> None:
    with psycopg.connect(PG_DSN, autocommit=True) as pg:
        pg.execute(f"SET search_path TO {pg_schema}".encode())
        expected = _run(pg, CASES[case])
        _cleanup(pg)
    with psycopg.connect(server.dsn(), autocommit=True) as wire:
        got = _run(wire, CASES[case])
        _cleanup(wire)
    assert list(zip(CASES[case], got, strict=True)) == list(zip(CASES[case], expected, strict=True))


def _conflict(dsn: str, table: str) -> list[str]:
    """Two repeatable-read transactions update one row; the later one must fail 40001."""
    with psycopg.connect(dsn, autocommit=True) as a, psycopg.connect(dsn, autocommit=True) as b:
        a.execute(f"CREATE TABLE {table} (id INTEGER, n INTEGER)".encode())
        a.execute(f"INSERT INTO {table} VALUES (1, 0)".encode())
        try:
            a.execute(b"BEGIN ISOLATION LEVEL REPEATABLE READ")
            b.execute(b"BEGIN ISOLATION LEVEL REPEATABLE READ")
            b.execute(f"SELECT n FROM {table}".encode())  # b's snapshot
            out = _run(a, [f"UPDATE {table} SET n = n + 1 WHERE id = 1", "COMMIT"])
            out += _run(b, [f"UPDATE {table} SET n = n + 1 WHERE id = 1", "ROLLBACK"])
            return out
        finally:
            a.execute(f"DROP TABLE {table}".encode())


def test_write_write_conflict_is_40001(pg_schema: str, server: WireProcess) -> None:
    expected = _conflict(PG_DSN + f" options=-csearch_path={pg_schema}", T)
    assert expected[2] == "ERROR 40001"
    assert _conflict(server.dsn(), T) == expected


def _malformed(port: int, user: str, database: str) -> tuple[str, bool]:
    """A Bind whose parameter length runs past its message: (SQLSTATE, the session answers
    a query after the Sync). PostgreSQL sends an ERROR, not a FATAL, and goes on."""
    sock = wire_raw.startup(port, user=user, database=database)
    try:
        wire_raw.until_ready(sock)
        parse = b"\0SELECT $1::int4\0" + struct.pack("!h", 0)
        bind = b"\0\0" + struct.pack("!hh", 0, 1) + struct.pack("!i", 100) + b"12"
        for kind, body in ((b"P", parse), (b"B", bind), (b"S", b"")):
            sock.sendall(kind + struct.pack("!i", len(body) + 4) + body)
        messages = wire_raw.until_ready(sock)
        errors = [wire_raw.error_fields(p) for k, p in messages if k == b"E"]
        query = b"SELECT 1\0"
        sock.sendall(b"Q" + struct.pack("!i", len(query) + 4) + query)
        answered = [k for k, _ in wire_raw.until_ready(sock)]
        return errors[0]["C"], answered == [b"T", b"D", b"C", b"Z"]
    finally:
        sock.close()


def test_malformed_message_is_08p01_and_the_session_goes_on(server: WireProcess) -> None:
    if not pg_available():
        pytest.skip("no PostgreSQL on 127.0.0.1:5432")
    expected = _malformed(5432, "postgres", "test")
    assert expected == ("08P01", True)
    assert _malformed(server.port, "tester", server.dbname) == expected


@pytest.mark.parametrize(
    ("error", "sqlstate"),
    [
        (duckdb.IOException('Could not write file "x.wal": No space left on device'), "53100"),
        (duckdb.TransactionException("TransactionContext Error: Conflict on update!"), "40001"),
        (duckdb.CatalogException("Catalog Error: Table with name t already exists!"), "42P07"),
        (duckdb.CatalogException("Catalog Error: Table with name t does not exist!"), "42P01"),
    ],
)
def test_messages_map_to_postgresql_codes(error: Exception, sqlstate: str) -> None:
    assert describe_error(error)[0] == sqlstate
