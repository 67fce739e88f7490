"""PostgreSQL array literals as postgres_fdw sends them (``= ANY ('{1,2,3}'::bigint[])``) and
untyped array parameters, against PostgreSQL 15 (issue 45)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from conftest import PG_DSN, WireProcess, wire_server

pytestmark = pytest.mark.integration

QUERIES = [
    "SELECT 2 = ANY ('{1,2,3}'::bigint[]) AS hit",
    "SELECT 5 = ANY ('{1,2,3}'::int4[]) AS hit",
    "SELECT 'b' = ANY ('{a,b}'::text[]) AS hit",
    "SELECT 'a b' = ANY ('{\"a b\",c}'::text[]) AS hit",
    "SELECT 'x' = ANY (CAST('{x,NULL}' AS text[])) AS hit",
    "SELECT 2 = ALL ('{2,2}'::bigint[]) AS hit",
]


@pytest.fixture(scope="module")
def wire(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WireProcess]:
    db: Path = tmp_path_factory.mktemp("arrays") / "a.duckdb"
    with wire_server(db, "--backend", "test:") as server:
        yield server


@pytest.mark.parametrize("sql", QUERIES)
def test_an_array_literal_reads_as_postgresql_reads_it(
    wire: WireProcess, needs_pg: None, sql: str
) -> None:
    with psycopg.connect(PG_DSN) as pg, psycopg.connect(wire.dsn(), autocommit=True) as ours:
        assert ours.execute(sql).fetchall() == pg.execute(sql).fetchall()


def test_an_untyped_list_parameter_of_any_is_an_array_of_text(
    wire: WireProcess, needs_pg: None
) -> None:
    sql = "SELECT %s = ANY(%s) AS hit"
    for args in (("r", ["r", "p"]), ("v", ["r", "p"])):
        with psycopg.connect(PG_DSN) as pg, psycopg.connect(wire.dsn()) as ours:
            assert ours.execute(sql, args).fetchall() == pg.execute(sql, args).fetchall()
