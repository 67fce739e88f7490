"""COPY ... TO STDOUT through the COPY sub-protocol: the same bytes as PostgreSQL 15 sends."""

from __future__ import annotations

import subprocess

import psycopg
import pytest
from conftest import PG_DSN, WireProcess, pg_available

pytestmark = pytest.mark.integration

ROWS = "SELECT 1 AS a, NULL AS b, 'x,y' AS c, '' AS d, E't\\tab\\\\x\\nl' AS e, 'say \"hi\"' AS f"
COPIES = [
    f"COPY ({ROWS}) TO STDOUT",
    f"COPY ({ROWS}) TO STDOUT WITH (FORMAT csv)",
    f"COPY ({ROWS}) TO STDOUT WITH (FORMAT csv, HEADER true, DELIMITER ';', NULL 'NA')",
    f"COPY ({ROWS}) TO STDOUT WITH CSV HEADER",
    "COPY (SELECT * FROM (VALUES (1), (2), (3)) AS v(n) ORDER BY n) TO STDOUT",
]


def _copy(conn: psycopg.Connection[tuple[object, ...]], sql: str) -> tuple[bytes, int]:
    with conn.cursor() as cur:
        with cur.copy(sql) as copy:
            data = b"".join(bytes(chunk) for chunk in copy)
        return data, cur.rowcount  # from the COPY n tag


def test_copy_to_stdout_matches_postgresql(server: WireProcess) -> None:
    if not pg_available():
        pytest.skip("no PostgreSQL on 127.0.0.1:5432 (.ci/run starts one)")
    with (
        psycopg.connect(PG_DSN, autocommit=True) as pg,
        psycopg.connect(server.dsn(), autocommit=True) as wire,
    ):
        for sql in COPIES:
            assert _copy(wire, sql) == _copy(pg, sql), sql
        assert _copy(wire, COPIES[-1]) == (b"1\n2\n3\n", 3)
        assert wire.execute("SELECT 1").fetchone() == (1,)  # the session goes on


def test_psql_copy_of_a_table(server: WireProcess) -> None:
    out = subprocess.run(
        ["psql", "-X", "-h", "127.0.0.1", "-p", str(server.port), "-U", "tester",
         "-d", server.dbname, "-c", r"\copy reviews TO STDOUT WITH CSV HEADER",
         "-c", r"\copy reviews FROM STDIN"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert out.stdout.splitlines() == [
        "id,text",
        "1,a good movie",
        "2,bad film",
        '3,"good acting, bad plot"',
        "4,dull",
    ]
    assert "COPY ... FROM STDIN is not supported" in out.stderr
