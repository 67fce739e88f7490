"""sem_sim_join, sem_search and the approximation settings through a real wire server (psycopg).

The server runs the SIMULATED hashed-words embedder (``sim-embed:``): deterministic, no model.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import psycopg
import pytest
from conftest import WireProcess, wire_server

pytestmark = pytest.mark.integration


@pytest.fixture
def sim_db(tmp_path: Path) -> Path:
    path = tmp_path / "sim.duckdb"
    con = duckdb.connect(str(path))
    con.execute(
        "CREATE TABLE q AS SELECT * FROM (VALUES (1, 'red apple pie'), (2, 'rainy night sky')) "
        "t(id, txt)"
    )
    con.execute(
        "CREATE TABLE d AS SELECT * FROM (VALUES (10, 'an apple pie, red and warm'), "
        "(20, 'the night sky was rainy'), (30, 'dogs bark')) t(did, body)"
    )
    con.close()
    return path


@pytest.fixture
def sim_server(sim_db: Path) -> Iterator[WireProcess]:
    env = {"DUCKDB_SEM_EMBED_BACKEND": "sim-embed:"}
    with wire_server(sim_db, "--backend", "test:?yes_if=apple", env=env) as proc:
        yield proc


def test_similarity_table_functions_over_the_wire(sim_server: WireProcess) -> None:
    with psycopg.connect(sim_server.dsn()) as conn:
        rows = conn.execute(
            "SELECT id, did, sem_rank FROM sem_sim_join('q', 'd', 'txt', 'body', 1) ORDER BY id"
        ).fetchall()
        assert rows == [(1, 10, 1), (2, 20, 1)]
        top = conn.execute("SELECT did FROM sem_search('d', 'body', 'barking dogs', 1)").fetchall()
        assert top == [(30,)]
        with pytest.raises(psycopg.Error, match="unknown column 'nope'"):
            conn.execute("SELECT * FROM sem_search('d', 'nope', 'x', 1)")


def test_approximation_settings_over_the_wire(sim_server: WireProcess) -> None:
    join = (
        "SELECT a.x, b.y FROM range(40) a(x) JOIN range(15) b(y) "
        "ON sem_join('{a.x} apple {b.y}') ORDER BY 1, 2"
    )
    with psycopg.connect(sim_server.dsn(), autocommit=True) as conn:
        lossless = conn.execute(join).fetchall()
        assert len(lossless) == 40 * 15  # yes_if=apple: every pair
        assert conn.execute("SHOW duckdb_sem.approximate").fetchall() == [("off",)]
        conn.execute("SET duckdb_sem.approximate = on")
        conn.execute("SET duckdb_sem.join_recall = 0.9")
        assert conn.execute("SHOW duckdb_sem.approximate").fetchall() == [("on",)]
        assert conn.execute("SHOW duckdb_sem.join_recall").fetchall() == [("0.9",)]
        blocked = conn.execute(join).fetchall()
        assert set(blocked) <= set(lossless) and len(blocked) >= 0.9 * len(lossless)
        with pytest.raises(psycopg.Error, match="join_recall"):
            conn.execute("SET duckdb_sem.join_recall = 2")
