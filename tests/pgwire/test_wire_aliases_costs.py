"""Over the wire: other systems' function names, and EXPLAIN SEMANTIC's time and money."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest
from conftest import make_db, wire_server

pytestmark = pytest.mark.integration


def test_aliases_and_the_cost_estimate_through_psycopg(tmp_path: Path) -> None:
    db = make_db(tmp_path / "sem.duckdb")
    env = {"DUCKDB_SEM_PRICE_IN": "3", "DUCKDB_SEM_PRICE_OUT": "15"}
    with (
        wire_server(db, "--backend", "test:?yes_if=good&latency_ms=10", env=env) as server,
        psycopg.connect(server.dsn(), autocommit=True) as conn,
    ):
        q = "SELECT id FROM reviews WHERE {}('Is it? {{text}}') ORDER BY id"
        got: list[Any] = conn.execute(q.format("ai_filter")).fetchall()
        assert got == [(1,), (3,)]
        assert conn.execute(q.format("llm_filter")).fetchall() == got
        assert conn.execute(q.format("sem_filter")).fetchall() == got
        gist = conn.execute("SELECT llm_complete('Gist: {text}') FROM reviews ORDER BY id")
        assert gist.fetchone() == ("Gist: a good movie",)
        plan = [r[0] for r in conn.execute("EXPLAIN SEMANTIC " + q.format("ai_if")).fetchall()]
        assert any(line.startswith("time≈") and "latency_ms=10" in line for line in plan), plan
        assert any(line.startswith("money≈$") and "$3 / $15 per million" in line for line in plan)
        with pytest.raises(psycopg.Error, match="duckdb-sem function"):
            conn.execute("CREATE MACRO ai_filter(t) AS true")


def test_a_statement_off_the_optimizer_is_estimated_over_the_wire(tmp_path: Path) -> None:
    db = make_db(tmp_path / "sem.duckdb")
    with (
        wire_server(db, "--backend", "test:") as server,
        psycopg.connect(server.dsn(), autocommit=True) as conn,
    ):
        q = (
            "SELECT r.id FROM reviews r LEFT JOIN reviews s ON s.id = r.id + 1000 "
            "WHERE sem_filter('Is it? {r.text}')"
        )
        plan = [r[0] for r in conn.execute("EXPLAIN SEMANTIC " + q).fetchall()]
        assert plan[0].startswith("not planned by the optimizer"), plan
        cte = "WITH r AS (SELECT * FROM reviews) SELECT id FROM r WHERE sem_filter('Is it? {text}')"
        planned = [r[0] for r in conn.execute("EXPLAIN SEMANTIC " + cte).fetchall()]
        assert any(line.startswith("road: planned by the optimizer") for line in planned)
        estimated = next(line for line in plan if line.startswith("estimated: calls≈"))
        rows = conn.execute("SELECT count(*) FROM reviews").fetchone()
        assert rows is not None and estimated.startswith(f"estimated: calls≈{rows[0]} ")
        assert any(line.startswith("estimated by a dry run") for line in plan)


def test_a_named_model_s_own_price_over_the_wire(tmp_path: Path) -> None:
    db = make_db(tmp_path / "sem.duckdb")
    # the wire server takes its models at start (sessions may not register them)
    env = {"DUCKDB_SEM_PRICE_IN": "1", "DUCKDB_SEM_PRICE_OUT": "2",
           "DUCKDB_SEM_MODELS": "big=test:?selectivity=0.3&price_in=5&price_out=20"}  # fmt: skip
    with (
        wire_server(db, "--backend", "test:?yes_if=good", env=env) as server,
        psycopg.connect(server.dsn(), autocommit=True) as conn,
    ):
        q = (
            "SELECT id, sem_map('Gist: {text}', model := 'big') FROM reviews "
            "WHERE sem_filter('Is it? {text}')"
        )
        plan = [r[0] for r in conn.execute("EXPLAIN SEMANTIC " + q).fetchall()]
        big = next(line for line in plan if line.startswith("  big: money≈$"))
        assert "$5 / $20 per million" in big and "model big's spec" in big
        default = next(line for line in plan if line.startswith("  default: money≈$"))
        assert "$1 / $2 per million" in default
