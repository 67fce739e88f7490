"""Against the real PostgreSQL on 5432: postgres_fdw over the wire server, PG tables as sources."""

from __future__ import annotations

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
    had_fdw = pg.execute(
        "SELECT count(*) FROM pg_extension WHERE extname = 'postgres_fdw'"
    ).fetchone()
    pg.execute("CREATE EXTENSION IF NOT EXISTS postgres_fdw")
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
        if had_fdw == (0,):
            pg.execute("DROP EXTENSION IF EXISTS postgres_fdw")


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
    finally:
        pg.execute(f"DROP TABLE IF EXISTS public.{table}")
