"""Through the wire: Describe makes no LLM call, LIMIT stops LLM work, parameters are planned.

LLM calls made by the server process are counted as the rows of its cache file (every answer
the backend gives is stored once); the oracle is ``test:?hash=0.5``, about half the rows.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg
import pytest
from conftest import make_db, wire_server

pytestmark = pytest.mark.integration

FILTER = "sem_filter('Is this one interesting? {text}')"


def answers(cache: Path) -> int:
    if not cache.exists():
        return 0
    with sqlite3.connect(cache) as db:
        (count,) = db.execute("SELECT count(*) FROM completions").fetchone()
    return int(count)


def test_limit_describe_and_parameters_over_the_wire(tmp_path: Path) -> None:
    db = make_db(tmp_path / "sem.duckdb", rows=20_000)
    cache = tmp_path / "wire-cache.sqlite"
    with (
        wire_server(db, "--backend", "test:?hash=0.5", "--cache", str(cache)) as server,
        psycopg.connect(server.dsn(), autocommit=True) as client,
    ):
        # Parse + Describe alone (as a BI tool does to learn the columns) makes no LLM call
        sql = f"SELECT id, text FROM big WHERE {FILTER}".encode()
        assert client.pgconn.prepare(b"described", sql).status == psycopg.pq.ExecStatus.COMMAND_OK
        described = client.pgconn.describe_prepared(b"described")
        assert described.nfields == 2 and described.fname(0) == b"id"
        assert answers(cache) == 0
        cur = client.cursor()
        # a prepared statement is described (Parse/Describe) before it runs
        cur.execute(f"SELECT id FROM big WHERE {FILTER} AND id < %s LIMIT %s", (5_000, 5),
                    prepare=True)  # fmt: skip
        assert len(cur.fetchall()) == 5
        assert [d.name for d in cur.description or []] == ["id"]
        assert answers(cache) <= 64
        before = answers(cache)
        cur.execute(f"SELECT id, text FROM big WHERE {FILTER} LIMIT 7")
        rows = cur.fetchall()
        assert len(rows) == 7 and all(isinstance(i, int) for i, _ in rows)
        assert answers(cache) - before <= 64


def test_budget_set_over_the_wire(tmp_path: Path) -> None:
    db = make_db(tmp_path / "sem.duckdb", rows=2_000)
    with (
        wire_server(db, "--backend", "test:?hash=0.5") as server,
        psycopg.connect(server.dsn(), autocommit=True) as client,
    ):
        client.execute("SET duckdb_sem.max_llm_calls = 100")
        assert client.execute("SHOW duckdb_sem.max_llm_calls").fetchall() == [("100",)]
        with pytest.raises(psycopg.Error) as caught:
            client.execute(f"SELECT id FROM big WHERE {FILTER}").fetchall()
        assert caught.value.sqlstate == "54000"
        assert "max_llm_calls=100" in str(caught.value)
        assert len(client.execute(f"SELECT id FROM big WHERE {FILTER} LIMIT 5").fetchall()) == 5
        client.execute("RESET duckdb_sem.max_llm_calls")
        assert len(client.execute(f"SELECT id FROM big WHERE {FILTER}").fetchall()) > 500
