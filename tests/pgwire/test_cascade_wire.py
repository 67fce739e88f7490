"""A sem_filter cascade through a real wire server (psycopg): SET/SHOW of its targets, and the
helper (a rule backend, ``DUCKDB_SEM_FILTER_HELPER``) deciding rows only once approximation is
on. TEST DOUBLES: ``test:`` rule backends as target and helper."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import psycopg
import pytest
from conftest import WireProcess, wire_server

pytestmark = pytest.mark.integration

QUERY = "SELECT id FROM t WHERE sem_filter('Is {txt} a ripe apple?') ORDER BY id"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[WireProcess]:
    path = tmp_path / "fruit.duckdb"
    con = duckdb.connect(str(path))
    con.execute(
        "CREATE TABLE t AS SELECT i AS id, CASE i % 3 WHEN 0 THEN 'red apple ' "
        "WHEN 1 THEN 'green apple ' ELSE 'yellow pear ' END || i AS txt FROM range(600) t(i)"
    )
    con.close()
    env = {"DUCKDB_SEM_FILTER_HELPER": "test:?yes_if=red|green"}
    with wire_server(path, "--backend", "test:?yes_if=red", env=env) as proc:
        yield proc


def test_cascade_settings_and_answers_over_the_wire(server: WireProcess) -> None:
    red = [(i,) for i in range(0, 600, 3)]
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        assert conn.execute(QUERY).fetchall() == red  # lossless: the target alone
        assert conn.execute("SHOW duckdb_sem.filter_precision").fetchall() == [("0.9",)]
        conn.execute("SET duckdb_sem.approximate = on")
        assert conn.execute(QUERY).fetchall() == red  # the helper only rejects pears
        conn.execute("SET duckdb_sem.filter_precision = 0.3")
        assert conn.execute("SHOW duckdb_sem.filter_precision").fetchall() == [("0.3",)]
        loose = conn.execute(QUERY).fetchall()
        assert set(loose) > set(red)  # green apples pass now: precision 0.5, bound over 0.3
        conn.execute("RESET duckdb_sem.filter_precision")
        assert conn.execute("SHOW duckdb_sem.filter_precision").fetchall() == [("0.9",)]
        with pytest.raises(psycopg.Error, match="filter_recall"):
            conn.execute("SET duckdb_sem.filter_recall = 2")
        assert conn.execute("SHOW duckdb_sem.confidence").fetchall() == [("0.9",)]
        conn.execute("SET duckdb_sem.confidence = 0.95")
        assert conn.execute("SHOW duckdb_sem.confidence").fetchall() == [("0.95",)]
        plan = "\n".join(r[0] for r in conn.execute("EXPLAIN SEMANTIC " + QUERY).fetchall())
        assert "at confidence 0.95" in plan, plan
        with pytest.raises(psycopg.Error, match="confidence"):
            conn.execute("SET duckdb_sem.confidence = 1")
