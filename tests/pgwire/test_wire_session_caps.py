"""Money caps on a real ``duckdb-sem pgwire``: per query, per session, per day; and a client's
own session caps.

The backend is the deterministic ``test:`` rule backend with a price in its spec, so every
spend is exact; what the server asked is counted as the rows of its cache file. A client may
``SET`` a capped setting lower, never above the cap or to ``NULL`` (22023); a query whose next
batch would pass a cap fails before that batch with 54000, naming the cap and its flag.
"""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from conftest import make_db, wire_server
from test_operator_limits import calls, rows_between, sqlstate_of

pytestmark = pytest.mark.integration

PRICED = "test:?yes_if=good&price_in=100&price_out=200"  # $0.0001 a prompt token


def test_cost_caps_per_query_session_and_day(tmp_path: Path) -> None:
    db = make_db(tmp_path / "sem.duckdb", rows=2_000)
    cache = tmp_path / "cache.sqlite"
    flags = ("--backend", PRICED, "--cache", str(cache), "--max-cost-per-query", "0.5",
             "--max-cost-per-session", "0.8", "--max-cost-per-day", "0.9")  # fmt: skip
    with wire_server(db, *flags) as server:
        with psycopg.connect(server.dsn(), autocommit=True) as client:
            show = "SHOW duckdb_sem.max_cost"
            assert client.execute(show).fetchall() == [("0.5",)]  # a session starts at the cap
            for escape in ("0.6", "NULL", "100"):
                code, message = sqlstate_of(client, f"SET duckdb_sem.max_cost = {escape}")
                assert code == "22023", (escape, message)
                assert "--max-cost-per-query" in message and "$0.50" in message
            code, message = sqlstate_of(client, "SET duckdb_sem.max_cost_per_session = 1")
            assert code == "22023" and "--max-cost-per-session" in message
            assert client.execute("SHOW duckdb_sem.max_cost_per_session").fetchall() == [("0.8",)]
            # the per-query cap: a query over 2,000 rows stops before its spend passes $0.50
            code, message = sqlstate_of(client, rows_between(0, 2_000))
            assert code == "54000" and "max_cost=$0.50" in message
            assert "--max-cost-per-query" in message
            first = calls(cache)
            assert 0 < first < 2_000
            client.execute("SET duckdb_sem.max_cost = 0.1")  # lower applies
            code, message = sqlstate_of(client, rows_between(1_000, 2_000))
            assert code == "54000" and "max_cost=$0.10" in message
            assert calls(cache) == first  # refused before the batch was sent
            client.execute("RESET duckdb_sem.max_cost")
            assert client.execute(show).fetchall() == [("0.5",)]
            # the session's cap: the queries together stop before $0.80
            code, message = sqlstate_of(client, rows_between(1_000, 2_000))
            assert code == "54000" and "--max-cost-per-session" in message
            assert "this session has spent $" in message and "of its $0.80" in message
            assert calls(cache) > first
        with psycopg.connect(server.dsn(), autocommit=True) as other:  # a session of its own
            code, message = sqlstate_of(other, rows_between(1_000, 2_000))
            assert code == "54000", message
            assert "--max-cost-per-day" in message and "midnight UTC" in message


def test_a_clients_own_session_cap_over_the_wire(tmp_path: Path) -> None:
    db = make_db(tmp_path / "sem.duckdb", rows=200)
    cache = tmp_path / "cache.sqlite"
    flags = ("--backend", PRICED, "--cache", str(cache), "--max-llm-calls-per-session", "50")
    with (
        wire_server(db, *flags) as server,
        psycopg.connect(server.dsn(), autocommit=True) as client,
    ):
        show = "SHOW duckdb_sem.max_llm_calls_per_session"
        assert client.execute(show).fetchall() == [("50",)]  # the operator's cap
        code, message = sqlstate_of(client, "SET duckdb_sem.max_llm_calls_per_session = NULL")
        assert code == "22023" and "--max-llm-calls-per-session" in message
        client.execute("SET duckdb_sem.max_llm_calls_per_session = 15")  # lower: the client's
        assert client.execute(rows_between(0, 10).encode()).fetchall() == [(5,)]
        code, message = sqlstate_of(client, rows_between(10, 20))
        assert code == "54000" and "10 of its 15" in message
        assert "duckdb_sem.max_llm_calls_per_session" in message
        assert calls(cache) == 10
        client.execute("RESET duckdb_sem.max_llm_calls_per_session")  # back to the cap, 50
        assert client.execute(show).fetchall() == [("50",)]
        assert client.execute(rows_between(10, 20).encode()).fetchall() == [(5,)]
        assert calls(cache) == 20
