"""What BI tools and psql read at connect, answered as PostgreSQL 15 answers it.

The statements psql 15 sends for its backslash commands (captured from a real PostgreSQL
session) and the connect-time statements of Grafana, Metabase, SQLAlchemy and DBeaver are
fixtures (``fixtures/client_catalog_queries.sql``): each must run on the wire server. Values a
client acts on (``server_version_num``, column names, type rows, oids) are compared with
PostgreSQL 15 on this machine where both have the object.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from conftest import PG_DSN, WireProcess, make_db, pg_available, wire_server

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).parent / "fixtures" / "client_catalog_queries.sql"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WireProcess]:
    """One wire server for the module, not one per test (their starts were most of its time):
    every test here only reads, and what a session sets (``application_name``, prepared
    statements) ends with it."""
    db = make_db(tmp_path_factory.mktemp("catalog") / "sem.duckdb")
    with wire_server(db, "--backend", "test:?yes_if=good") as proc:
        yield proc


def _blocks() -> list[str]:
    text = FIXTURES.read_text()
    return [b.strip() for b in text.split("\n-- next\n")[0:] if b.strip()]


def _label(block: str) -> str:
    comments = [line for line in block.splitlines() if line.startswith("--")]
    return comments[-1].removeprefix("-- ") if comments else block[:30]


BLOCKS = _blocks()


@pytest.mark.parametrize("block", BLOCKS, ids=[f"{i}-{_label(b)}" for i, b in enumerate(BLOCKS)])
def test_client_catalog_statement_runs(server: WireProcess, block: str) -> None:
    sql = "\n".join(line for line in block.splitlines() if not line.startswith("--"))
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        cur = conn.execute(sql.encode())
        assert cur.description is not None
        cur.fetchall()


def _first(conn: psycopg.Connection[Any], sql: str) -> tuple[list[str], Any]:
    cur = conn.execute(sql.encode())
    assert cur.description is not None
    row = cur.fetchone()
    return [d.name for d in cur.description], None if row is None else row[0]


_SAME_AS_POSTGRES = [
    "SELECT current_setting('server_version_num')::int >= 150000",
    "SELECT length(current_setting('server_version_num'))",
    "SELECT 1, 'a', 2 + 2",
    "SELECT current_setting('integer_datetimes')",
    "SELECT current_setting('DateStyle')",
    "SELECT version() LIKE 'PostgreSQL 15%'",
    "SELECT count(*) = 1 FROM pg_stat_activity WHERE pid = pg_backend_pid()",
    "SELECT count(*) FROM pg_auth_members WHERE member = 0",
    "SELECT typname FROM pg_type WHERE oid = 25",
    "SELECT typname FROM pg_type WHERE oid = 114",
    "SELECT typname FROM pg_catalog.pg_type WHERE oid = 3802",
    "SELECT typlen FROM pg_type WHERE typname = 'text'",
    "SELECT typelem FROM pg_type WHERE oid = 1009",
    "SELECT pg_is_in_recovery()",
    "SELECT to_regclass('dsem_no_such_table') IS NULL",
]


@pytest.mark.parametrize("sql", _SAME_AS_POSTGRES)
def test_values_and_column_names_as_postgresql(server: WireProcess, sql: str) -> None:
    if not pg_available():
        pytest.skip("no PostgreSQL on 127.0.0.1:5432 (.ci/run starts one)")
    with psycopg.connect(PG_DSN, autocommit=True) as pg:
        expected = _first(pg, sql)
    with psycopg.connect(server.dsn(), autocommit=True) as wire:
        assert _first(wire, sql) == expected


def test_version_and_setting_columns_are_named_as_postgresql(server: WireProcess) -> None:
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        names, text = _first(conn, "SELECT version()")
        assert names == ["version"] and text.startswith("PostgreSQL 15")
        conn.execute(b"SET application_name = 'grafana'")
        assert _first(conn, "SELECT current_setting('application_name')") == (
            ["current_setting"],
            "grafana",
        )
        assert _first(conn, "SELECT application_name FROM pg_stat_activity")[1] == "grafana"
        with pytest.raises(psycopg.errors.UndefinedObject):
            conn.execute(b"SELECT current_setting('dsem.no_such_setting')")


def test_regclass_is_the_relation_oid(server: WireProcess) -> None:
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        _, oid = _first(conn, "SELECT 'reviews'::regclass::oid")
        _, same = _first(conn, "SELECT oid FROM pg_class WHERE relname = 'reviews'")
        assert oid == same and isinstance(oid, int)
        assert _first(conn, "SELECT count(*) FROM pg_attribute WHERE attrelid = "
                            "'reviews'::regclass AND attnum > 0")[1] == 2  # fmt: skip
        with pytest.raises(psycopg.errors.UndefinedTable):
            conn.execute(b"SELECT 'dsem_no_such_table'::regclass")


def test_prepare_with_parameter_types(server: WireProcess) -> None:
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        assert conn.execute(b"PREPARE p(int) AS SELECT $1 + 1").statusmessage == "PREPARE"
        assert _first(conn, "EXECUTE p(41)")[1] == 42
        conn.execute(b"PREPARE q(int, text) AS SELECT id FROM reviews WHERE id > $1 AND $2 = 'x'")
        assert conn.execute(b"EXECUTE q('2', 'x')").fetchall() == [(3,), (4,)]
        with pytest.raises(psycopg.errors.InvalidTextRepresentation):
            conn.execute(b"EXECUTE p('not a number')")


def _psql(server: WireProcess, command: str) -> str:
    out = subprocess.run(
        ["psql", "-X", "-h", "127.0.0.1", "-p", str(server.port), "-U", "tester",
         "-d", server.dbname, "-c", command],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert out.returncode == 0 and not out.stderr, (command, out.stderr)
    return out.stdout


def test_psql_df_lists_the_sem_functions_with_signatures(server: WireProcess) -> None:
    rows = {
        cells[1]: cells
        for line in _psql(server, r"\df").splitlines()
        if len(cells := [c.strip() for c in line.split("|")]) == 5
    }
    assert rows["sem_filter"][2] == "boolean"
    assert rows["sem_filter"][3].startswith("t text, a0 text DEFAULT NULL")
    assert rows["sem_classify"][3].startswith("t text, l text[], a0 text")
    assert rows["sem_map_integer"][2] == "integer"
    assert rows["sem_agg"][4] == "agg"
    assert {r[0] for r in rows.values() if r[0] != "Schema"} == {"main"}


def test_psql_du_dx_dt_answer(server: WireProcess) -> None:
    assert "duckdb" in _psql(server, r"\du")
    assert "List of installed extensions" in _psql(server, r"\dx")
    assert "(0 rows)" in _psql(server, r"\dT")
