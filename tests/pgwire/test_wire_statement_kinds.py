"""Every statement kind with a semantic SELECT is planned over the wire too, and its LIMIT
stops the LLM work: the server runs with a budget of 64 calls per query, which the UDF path
(2,048-row vectors) would pass and the planned road does not."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from conftest import WireProcess, make_db, wire_server

pytestmark = pytest.mark.integration

GOOD = "sem_filter('{text} is positive')"  # test:?yes_if=good: rows whose text says good


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WireProcess]:
    db = make_db(tmp_path_factory.mktemp("kinds") / "kinds.duckdb", rows=20_000)
    env = {"DUCKDB_SEM_MAX_LLM_CALLS": "64"}
    with wire_server(db, "--backend", "test:?yes_if=good", env=env) as proc:
        yield proc


@pytest.mark.parametrize(
    "sql",
    [
        f"WITH c AS (SELECT id FROM big WHERE {GOOD}) SELECT * FROM c LIMIT 5",
        f"SELECT * FROM (SELECT id FROM big WHERE {GOOD}) LIMIT 5",
        f"SELECT * FROM (SELECT id FROM big WHERE {GOOD}) AS src LIMIT 5",
    ],
    ids=["cte", "wrapper", "wrapper-alias"],
)
def test_a_wrapped_limit_stays_within_64_calls(server: WireProcess, sql: str) -> None:
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        plan = [r[0] for r in conn.execute("EXPLAIN SEMANTIC " + sql).fetchall()]
        assert any(line.startswith("road: planned by the optimizer") for line in plan), plan
        assert conn.execute(sql).fetchall() == [(0,), (2,), (4,), (6,), (8,)]


def test_the_budget_would_stop_the_same_query_without_its_limit(server: WireProcess) -> None:
    with (
        psycopg.connect(server.dsn(), autocommit=True) as conn,
        pytest.raises(psycopg.Error, match="max_llm_calls=64"),
    ):
        conn.execute(f"WITH c AS (SELECT id FROM big WHERE {GOOD}) SELECT count(*) FROM c")


def test_writes_are_planned_in_the_client_s_transaction(server: WireProcess) -> None:
    with psycopg.connect(server.dsn()) as conn:  # psycopg opens a transaction
        conn.execute(f"CREATE TABLE hits AS SELECT id, text FROM big WHERE {GOOD} LIMIT 5")
        conn.execute(f"INSERT INTO hits SELECT id, text FROM big WHERE id >= 100 AND {GOOD} "
                     "LIMIT 3")  # fmt: skip
        conn.execute("UPDATE hits SET text = sem_map('{text} in short') WHERE id < 4")
        conn.execute(f"DELETE FROM hits WHERE id > 100 AND {GOOD}")
        rows = conn.execute("SELECT id, text FROM hits ORDER BY id").fetchall()
        assert rows == [(0, "row 0 good in short"), (2, "row 2 good in short"), (4, "row 4 good"),
                        (6, "row 6 good"), (8, "row 8 good"), (100, "row 100 good")]  # fmt: skip
        conn.rollback()
    with (
        psycopg.connect(server.dsn(), autocommit=True) as conn,
        pytest.raises(psycopg.errors.UndefinedTable),
    ):
        conn.execute("SELECT * FROM hits")  # rolled back with the client's transaction


def test_semantic_calls_inside_expressions_over_the_wire(server: WireProcess) -> None:
    sql = (
        f"SELECT id, CASE WHEN {GOOD} THEN 'pos' ELSE 'neg' END AS v FROM big "
        "WHERE id < 4 ORDER BY id"
    )
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        assert conn.execute(sql).fetchall() == [(0, "pos"), (1, "neg"), (2, "pos"), (3, "neg")]
