"""The wire is one more way onto the one road: the same values become the same prompt text
(so a query answered over the wire is answered from the cache in-process), parameters
included, and EXPLAIN SEMANTIC VERBOSE over the wire shows what the model is asked."""

from __future__ import annotations

from pathlib import Path

import duckdb
import psycopg
import pytest
from conftest import wire_server

import duckdb_sem

pytestmark = pytest.mark.integration

BACKEND = "test:?hash=0.5"  # answers depend on the rendered values only
SQL = (
    "SELECT id FROM t WHERE id < {bound} AND "
    "sem_filter('value {{r}} flag {{b}} at {{ts}} on {{d}}') ORDER BY id"
)


def _db(path: Path) -> Path:
    con = duckdb.connect(str(path))
    con.execute(
        "CREATE TABLE t AS SELECT range::INTEGER AS id, (range / 7)::REAL AS r, "
        "range % 3 = 0 AS b, TIMESTAMPTZ '2024-03-10 01:30:00+00' + range * INTERVAL 1 HOUR "
        "AS ts, DATE '2024-01-01' + range::INTEGER AS d FROM range(60)"
    )
    con.close()
    return path


def test_wire_and_in_process_share_prompts_and_cache(tmp_path: Path) -> None:
    db = _db(tmp_path / "one.duckdb")
    cache = tmp_path / "cache.sqlite"
    with (
        wire_server(db, "--backend", BACKEND, "--cache", str(cache)) as server,
        psycopg.connect(server.dsn(), autocommit=True) as client,
    ):
        cur = client.cursor()
        cur.execute(SQL.format(bound="%s"), (50,))
        over_wire = [row[0] for row in cur.fetchall()]
        cur.execute("EXPLAIN SEMANTIC VERBOSE " + SQL.format(bound=50))
        explained = "\n".join(row[0] for row in cur.fetchall())
    assert 0 < len(over_wire) < 50
    assert "prompts (the first row of each operator):" in explained
    assert "backend: test:" in explained
    # the first row as the model sees it (DuckDB's ::VARCHAR; a wire session starts in the
    # server's zone, UTC)
    assert "[user] value 0.0 flag true at 2024-03-10 01:30:00+00 on 2024-01-01" in explained

    con = duckdb_sem.connect(str(db), backend=BACKEND, cache=str(cache))
    con.execute("SET TimeZone = 'UTC'")
    in_process = [row[0] for row in con.sql(SQL.format(bound=50)).fetchall()]
    assert in_process == over_wire
    assert con.stats().physical_calls == 0  # every prompt was the wire's, answered from cache
    con.close()
