"""Isolation: no session changes what another sees or runs, except through the user's database.

Each rule is tried by client A, and client B (open at the same time) checks it still sees and
runs what it did before.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from conftest import WireProcess, wire_server

pytestmark = pytest.mark.integration

Conn = psycopg.Connection[tuple[object, ...]]
TYPED = "SELECT sem_map_integer('{0}', 'abc')"


@pytest.fixture
def read_only(db_file: Path, tmp_path: Path) -> Iterator[WireProcess]:
    users = tmp_path / "users"
    users.write_text("alice:pw\nbob:pw\n")
    args = ("--backend", "test:?yes_if=good", "--read-only", "--users", str(users))
    with wire_server(db_file, *args) as proc:
        yield proc


def _refused(conn: Conn, sql: str, code: str) -> None:
    with pytest.raises(psycopg.Error) as info:
        conn.execute(sql)
    assert info.value.sqlstate == code, (sql, info.value)


def test_catalogs_cannot_be_detached_or_attached(read_only: WireProcess) -> None:
    with (
        psycopg.connect(read_only.dsn(user="alice", password="pw"), autocommit=True) as a,
        psycopg.connect(read_only.dsn(user="bob", password="pw"), autocommit=True) as b,
    ):
        for sql in ("DETACH sem", "DETACH DATABASE IF EXISTS memory", 'DETACH "sem"'):
            _refused(a, sql, "42501")
        for sql in (
            "ATTACH ':memory:' AS scratch",
            "ATTACH 'x.duckdb' AS x",
            "EXPLAIN ANALYZE CREATE MACRO sem_filter(t) AS true",
        ):
            _refused(a, sql, "42501")
        assert b.execute("SELECT count(*) FROM reviews").fetchone() == (4,)
        assert a.execute("SELECT count(*) FROM reviews").fetchone() == (4,)
    with psycopg.connect(read_only.dsn(user="bob", password="pw")) as c:
        assert c.execute("SELECT count(*) FROM reviews").fetchone() == (4,)


def test_sem_functions_cannot_be_redefined_for_others(server: WireProcess) -> None:
    with (
        psycopg.connect(server.dsn(), autocommit=True) as a,
        psycopg.connect(server.dsn(), autocommit=True) as b,
    ):
        before = b.execute(TYPED).fetchone()
        assert before == (3,)  # the test backend's number for a row is its length
        for sql in (
            "CREATE OR REPLACE MACRO memory.main.sem_map_integer(t, a0) AS 424242",
            "CREATE OR REPLACE MACRO sem_map_integer(t, a0) AS 424242",
            'CREATE OR REPLACE TEMP MACRO "sem_filter"(t) AS true',
            "CREATE MACRO sem.main.__semudf_map(t, v) AS 'x'",
            "CREATE FUNCTION pg_get_userbyid(x) AS 'mallory'",
            "DROP MACRO sem_map",
        ):
            _refused(a, sql, "42501")
        # A look-alike under another name is A's own business and shadows nothing.
        a.execute("CREATE OR REPLACE TEMP MACRO my_map(t, a0) AS 424242")
        assert b.execute(TYPED).fetchone() == before
        assert a.execute(TYPED).fetchone() == before
        rows = b.execute(
            "SELECT id FROM reviews WHERE sem_filter('{text} is positive') ORDER BY id"
        ).fetchall()
        assert rows == [(1,), (3,)]


def test_no_shared_scratch_catalog(server: WireProcess) -> None:
    with (
        psycopg.connect(server.dsn(), autocommit=True) as a,
        psycopg.connect(server.dsn(), autocommit=True) as b,
    ):
        with pytest.raises(psycopg.Error, match="memory"):
            a.execute("CREATE TABLE memory.main.big AS SELECT * FROM range(10)")
        a.execute("CREATE TEMP TABLE mine AS SELECT 1 AS x")
        assert a.execute("SELECT x FROM mine").fetchone() == (1,)
        _refused(b, "SELECT x FROM mine", "42P01")
        # The user's database is shared, as a PostgreSQL database is.
        a.execute("CREATE TABLE shared_t AS SELECT 2 AS y")
        assert b.execute("SELECT y FROM shared_t").fetchone() == (2,)


def test_read_only_server_is_read_only_for_every_object(read_only: WireProcess) -> None:
    with (
        psycopg.connect(read_only.dsn(user="alice", password="pw"), autocommit=True) as a,
        psycopg.connect(read_only.dsn(user="bob", password="pw"), autocommit=True) as b,
    ):
        for sql in (
            "CREATE TABLE t (a INTEGER)",
            "CREATE TEMP TABLE filler AS SELECT * FROM range(1000000)",
            "CREATE TEMP MACRO m(a) AS a",
            "CREATE TEMP VIEW v AS SELECT 1",
            "INSERT INTO reviews VALUES (9, 'x')",
            "/* hidden */ DELETE FROM reviews",
            "PREPARE p AS DELETE FROM reviews",
            "CREATE SEQUENCE s",
            "EXPLAIN ANALYZE CREATE TEMP TABLE sneaky AS SELECT 1 AS a",
            "EXPLAIN (ANALYZE) DELETE FROM reviews",
        ):
            _refused(a, sql, "25006")
        assert a.execute("SELECT count(*) FROM reviews").fetchone() == (4,)
        assert b.execute("SELECT count(*) FROM reviews").fetchone() == (4,)
        a.execute("PREPARE q AS SELECT count(*) FROM reviews")
        assert a.execute("EXECUTE q").fetchone() == (4,)


def test_temp_directory_is_not_reachable(db_file: Path) -> None:
    spill = Path(str(db_file) + ".tmp")
    spill.mkdir()
    with (
        wire_server(db_file, "--backend", "test:") as server,
        psycopg.connect(server.dsn(), autocommit=True) as conn,
    ):
        assert conn.execute("SELECT current_setting('temp_directory')").fetchone() == ("",)
        for sql in (
            f"COPY (SELECT 1) TO '{spill / 'x.csv'}'",
            f"COPY (SELECT 1) TO '{db_file.name}.tmp/x.csv'",
            f"SELECT * FROM read_csv('{spill / 'x.csv'}')",
        ):
            _refused(conn, sql, "42501")
        _refused(conn, f"ATTACH '{spill / 'a.duckdb'}' AS a", "42501")
    assert list(spill.iterdir()) == []
