"""Against the real PostgreSQL on 5432: postgres_fdw over the wire server, PG tables as sources."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from conftest import PG_DSN, WireProcess, wire_server

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("needs_pg")]


@pytest.fixture
def pg() -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        yield conn


def _create_fdw_extension(pg: psycopg.Connection[tuple[object, ...]]) -> None:
    """postgres_fdw, created once and kept: the server on 5432 is shared by every test run on
    the machine, so one run's DROP EXTENSION failed another's foreign server (or its own, on
    the other's dependants), and two concurrent CREATE EXTENSION IF NOT EXISTS can both try to
    insert it (a unique violation); an advisory lock orders the creators."""
    pg.execute("SELECT pg_advisory_lock(hashtext('duckdb-sem tests: postgres_fdw'))")
    try:
        pg.execute("CREATE EXTENSION IF NOT EXISTS postgres_fdw")
    finally:
        pg.execute("SELECT pg_advisory_unlock(hashtext('duckdb-sem tests: postgres_fdw'))")


def test_postgres_fdw_selects_a_semantic_view(
    server: WireProcess, pg: psycopg.Connection[tuple[object, ...]]
) -> None:
    with psycopg.connect(server.dsn(), autocommit=True) as wire:
        wire.execute(
            "CREATE VIEW good_reviews AS SELECT id, text FROM reviews "
            "WHERE sem_filter('{0} is positive', text)"
        )
    tag = uuid.uuid4().hex[:10]
    srv, schema = f"dsem_srv_{tag}", f"dsem_fdw_{tag}"
    _create_fdw_extension(pg)
    try:
        pg.execute(
            f"CREATE SERVER {srv} FOREIGN DATA WRAPPER postgres_fdw "
            f"OPTIONS (host '127.0.0.1', port '{server.port}', dbname '{server.dbname}')"
        )
        pg.execute(f"CREATE USER MAPPING FOR CURRENT_USER SERVER {srv} OPTIONS (user 'fdw')")
        pg.execute(f"CREATE SCHEMA {schema}")
        pg.execute(
            f"IMPORT FOREIGN SCHEMA main LIMIT TO (good_reviews) FROM SERVER {srv} INTO {schema}"
        )
        rows = pg.execute(f"SELECT id, text FROM {schema}.good_reviews ORDER BY id").fetchall()
        assert rows == [(1, "a good movie"), (3, "good acting, bad plot")]
        pg.execute(
            f"CREATE FOREIGN TABLE {schema}.ft (id INTEGER, text TEXT) SERVER {srv} "
            "OPTIONS (schema_name 'main', table_name 'good_reviews')"
        )
        assert pg.execute(f"SELECT id FROM {schema}.ft WHERE id > 1").fetchall() == [(3,)]
    finally:
        pg.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        pg.execute(f"DROP SERVER IF EXISTS {srv} CASCADE")


def test_postgres_table_as_source_through_the_wire(
    db_file: Path, pg: psycopg.Connection[tuple[object, ...]]
) -> None:
    table = f"dsem_src_{uuid.uuid4().hex[:10]}"
    pg.execute(
        f"CREATE TABLE public.{table} (id INTEGER, text TEXT, stars INTEGER, price NUMERIC(6,2))"
    )
    try:
        pg.execute(
            f"INSERT INTO public.{table} VALUES (1, 'a good movie', 5, 1.50), "
            "(2, 'bad film', 1, NULL), (3, 'good acting', 2, 2.00), (4, '', 4, 0)"
        )
        args = ("--backend", "test:?yes_if=good", "--postgres", f"pg={PG_DSN}")
        with (
            wire_server(db_file, *args) as server,
            psycopg.connect(server.dsn(), autocommit=True) as conn,
        ):
            rows = conn.execute(
                f"SELECT id, price FROM pg.public.{table} r WHERE r.stars >= 2 "
                "AND sem_filter('{text} is positive') ORDER BY id"
            ).fetchall()
            assert [(i, str(p)) for i, p in rows] == [(1, "1.50"), (3, "2.00")]
            assert conn.execute(
                f"SELECT count(*) FROM pg.public.{table} WHERE text = ''"
            ).fetchone() == (1,)
            listed = subprocess.run(
                ["psql", "-X", "-At", "-h", "127.0.0.1", "-p", str(server.port), "-U", "t",
                 "-d", server.dbname, "-c", r"\dt"],
                capture_output=True, text=True, timeout=30, check=True,
            ).stdout.splitlines()  # fmt: skip
            assert f"pg.public|{table}|table|duckdb" in listed
            assert "main|reviews|table|duckdb" in listed
    finally:
        pg.execute(f"DROP TABLE IF EXISTS public.{table}")


TYPES = {
    "i2": "SMALLINT", "i4": "INTEGER", "i8": "BIGINT", "f4": "REAL", "f8": "DOUBLE PRECISION",
    "num": "NUMERIC(10,2)", "ok": "BOOLEAN", "txt": "TEXT", "vc": "VARCHAR(20)", "d": "DATE",
    "ts": "TIMESTAMP", "tstz": "TIMESTAMPTZ", "u": "UUID", "j": "JSONB",
}  # fmt: skip


def _typed(column: str, value: object) -> object:
    # uuid and json columns of a PostgreSQL source arrive as text (docs/pgwire.md)
    if column == "u" and value is not None:
        return str(value)
    if column == "j" and isinstance(value, str):
        return json.loads(value)
    return value


def _fingerprint(conn: psycopg.Connection[tuple[object, ...]], table: str) -> dict[str, object]:
    """count(*), and per column the count of non-NULLs and a checksum of the sorted values."""
    out: dict[str, object] = {}
    out["count"] = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
    for column in ("note", *TYPES):
        values = [_typed(column, r[0]) for r in conn.execute(f"SELECT {column} FROM {table}")]
        texts = sorted("NULL" if v is None else f"{type(v).__name__}:{v}" for v in values)
        out[column] = (len(values), sum(v is not None for v in values), hash(tuple(texts)))
    out["note only"] = conn.execute(
        f"SELECT count(*) FROM (SELECT note FROM {table}) AS s"
    ).fetchone()
    return out


def test_postgres_source_loses_no_rows_or_values(
    db_file: Path, pg: psycopg.Connection[tuple[object, ...]]
) -> None:
    table = f"dsem_rt_{uuid.uuid4().hex[:10]}"
    columns = ", ".join(f"{name} {kind}" for name, kind in TYPES.items())
    pg.execute(f"CREATE TABLE public.{table} (note TEXT, {columns})")
    try:
        # 100 rows whose every column is NULL (a NULL-only CSV line is empty), then edge values.
        pg.execute(f"INSERT INTO public.{table} (note) SELECT NULL FROM generate_series(1, 100)")
        pg.execute(
            f"INSERT INTO public.{table} VALUES "
            "('', -32768, -2147483648, 9223372036854775807, 1.5, -0.25, 12345678.91, true, '', "
            "'', '2024-02-29', '2024-01-01 10:00:00.123456', '2024-01-01 10:00+02', "
            "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{\"a\": [1, null]}'), "
            "('line\nbreak, \"quoted\"', 0, 0, 0, 'NaN', 'Infinity', 0, false, 'NULL', ' ', "
            "'1970-01-01', '1999-12-31 23:59:59', '2000-01-01 00:00:00+00', "
            "'00000000-0000-0000-0000-000000000000', 'null')"
        )
        expected = _fingerprint(pg, f"public.{table}")
        assert expected["count"] == (102,) and expected["note only"] == (102,)
        args = ("--backend", "test:", "--postgres", f"pg={PG_DSN}")
        with (
            wire_server(db_file, *args) as server,
            psycopg.connect(server.dsn(), autocommit=True) as conn,
        ):
            got = _fingerprint(conn, f"pg.public.{table}")
            assert conn.execute(
                f"SELECT count(*) FROM pg.public.{table} WHERE note = ''"
            ).fetchone() == (1,)
    finally:
        pg.execute(f"DROP TABLE IF EXISTS public.{table}")
    differing = {k: (expected[k], got[k]) for k in expected if expected[k] != got[k]}
    assert differing == {}
