"""bytea constants store PostgreSQL's bytes (issue 44 item 4), against PostgreSQL 15."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from conftest import PG_DSN, WireProcess, wire_server

from duckdb_sem.pgwire.bytea_literals import pg_bytea

pytestmark = pytest.mark.integration

LITERALS = [
    r"'\x00ff'::bytea",
    r"'\xdeadbeef'::bytea",
    r"'\xDE AD be ef'::bytea",
    r"CAST('\x0102' AS bytea)",
    r"'a\000b'::bytea",
    r"'back\\slash'::bytea",
    r"'plain text'::bytea",
    "decode('deadbeef', 'hex')",
    "decode('3q2+7w==', 'base64')",
    r"decode('a\000b', 'escape')",
]


@pytest.fixture(scope="module")
def wire(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WireProcess]:
    db: Path = tmp_path_factory.mktemp("bytea") / "b.duckdb"
    with wire_server(db, "--backend", "test:") as server:
        yield server


@pytest.mark.parametrize("literal", LITERALS)
def test_a_bytea_constant_is_postgresqls_bytes(
    wire: WireProcess, needs_pg: None, literal: str
) -> None:
    sql = f"SELECT {literal} AS b, octet_length({literal}) AS n"
    with psycopg.connect(PG_DSN) as pg:
        expected = pg.execute(sql).fetchone()
    with psycopg.connect(wire.dsn(), autocommit=True) as ours:
        got = ours.execute(sql).fetchone()
        ours.execute("CREATE OR REPLACE TABLE blobs (b BLOB)")
        ours.execute(f"INSERT INTO blobs VALUES ({literal})")
        stored = ours.execute("SELECT b FROM blobs").fetchone()
    assert expected is not None and got is not None and stored is not None
    assert (bytes(got[0]), got[1]) == (bytes(expected[0]), expected[1])
    assert bytes(stored[0]) == bytes(expected[0])


def test_bytea_input_refuses_what_postgresql_refuses() -> None:
    with pytest.raises(ValueError):
        pg_bytea("\\q")
    assert pg_bytea("\\x") == b""
