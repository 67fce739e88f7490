"""Operator limits on a real ``duckdb-sem pgwire``: caps no client ``SET`` can raise.

The backend is the deterministic ``test:`` rule backend; the LLM calls the server made are
counted as the rows of its cache file (each answer the backend gives is stored once), so a
count is what the server really asked, not what it says. Startup ``-c`` options are compared
with PostgreSQL 15's answers where PostgreSQL has the same setting.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg
import pytest
from conftest import PG_DSN, WireProcess, make_db, wire_server

pytestmark = pytest.mark.integration

BACKEND = "test:?yes_if=good"
FILTER = "sem_filter('Is this one positive? {text}')"


def calls(cache: Path) -> int:
    """The backend calls the server made (answers stored in its cache)."""
    if not cache.exists():
        return 0
    with sqlite3.connect(cache) as db:
        (count,) = db.execute("SELECT count(*) FROM completions").fetchone()
    return int(count)


def rows_between(lo: int, hi: int) -> str:
    return f"SELECT count(*) FROM big WHERE id >= {lo} AND id < {hi} AND {FILTER}"


def sqlstate_of(conn: psycopg.Connection[tuple[object, ...]], sql: str) -> tuple[str, str]:
    with pytest.raises(psycopg.Error) as caught:
        conn.execute(sql.encode()).fetchall()
    return caught.value.sqlstate or "", str(caught.value)


def test_per_query_cap_set_lower_never_higher(tmp_path: Path) -> None:
    db = make_db(tmp_path / "sem.duckdb", rows=2_000)
    cache = tmp_path / "cache.sqlite"
    flags = ("--backend", BACKEND, "--cache", str(cache), "--max-llm-calls-per-query", "300")
    with (
        wire_server(db, *flags) as server,
        psycopg.connect(server.dsn(), autocommit=True) as client,
    ):
        show = "SHOW duckdb_sem.max_llm_calls"
        assert client.execute(show).fetchall() == [("300",)]  # a session starts at the cap
        for escape in ("500", "NULL", "301"):
            code, message = sqlstate_of(client, f"SET duckdb_sem.max_llm_calls = {escape}")
            assert code == "22023", (escape, message)
            assert "--max-llm-calls-per-query" in message and "300" in message
            assert client.execute(show).fetchall() == [("300",)]  # nothing changed
        # the case: a query over 2,000 rows stops at the cap (SEUs of 64: 256 made)
        code, message = sqlstate_of(client, f"SELECT id FROM big WHERE {FILTER}")
        assert code == "54000" and "max_llm_calls=300" in message
        assert "--max-llm-calls-per-query" in message
        assert calls(cache) == 256
        # lower applies and is enforced
        client.execute("SET duckdb_sem.max_llm_calls = 10")
        assert client.execute(show).fetchall() == [("10",)]
        code, message = sqlstate_of(client, rows_between(1_000, 1_100))
        assert code == "54000" and "max_llm_calls=10" in message
        assert calls(cache) == 256  # refused before the SEU was sent
        assert client.execute(rows_between(1_000, 1_008).encode()).fetchall() == [(4,)]
        assert calls(cache) == 264
        # RESET and DEFAULT go back to the operator's cap, not to unlimited
        client.execute("RESET duckdb_sem.max_llm_calls")
        assert client.execute(show).fetchall() == [("300",)]
        client.execute("SET duckdb_sem.max_llm_calls = 7")
        client.execute("SET duckdb_sem.max_llm_calls TO DEFAULT")
        assert client.execute(show).fetchall() == [("300",)]
        client.execute("SET duckdb_sem.max_llm_calls = 7")
        client.execute("RESET ALL")
        assert client.execute(show).fetchall() == [("300",)]
        assert client.execute(rows_between(1_100, 1_300).encode()).fetchall() == [(100,)]


def test_process_budget_is_the_servers_cap(tmp_path: Path) -> None:
    """DUCKDB_SEM_MAX_LLM_CALLS on the server process is a cap too (the issue: 2,000 calls)."""
    db = make_db(tmp_path / "sem.duckdb", rows=2_000)
    cache = tmp_path / "cache.sqlite"
    env = {"DUCKDB_SEM_MAX_LLM_CALLS": "300", "DUCKDB_SEM_MAX_PROMPT_TOKENS": "100000"}
    with (
        wire_server(db, "--backend", BACKEND, "--cache", str(cache), env=env) as server,
        psycopg.connect(server.dsn(), autocommit=True) as client,
    ):
        code, message = sqlstate_of(client, "SET duckdb_sem.max_llm_calls = NULL")
        assert code == "22023" and "DUCKDB_SEM_MAX_LLM_CALLS" in message
        code, message = sqlstate_of(client, "SET duckdb_sem.max_prompt_tokens = 100001")
        assert code == "22023" and "DUCKDB_SEM_MAX_PROMPT_TOKENS" in message
        client.execute("SET duckdb_sem.max_prompt_tokens = 99")
        assert client.execute("SHOW duckdb_sem.max_prompt_tokens").fetchall() == [("99",)]
        client.execute("RESET duckdb_sem.max_prompt_tokens")
        code, _ = sqlstate_of(client, f"SELECT id FROM big WHERE {FILTER}")
        assert code == "54000"
        assert calls(cache) == 256


def test_per_session_cap_counts_across_queries(tmp_path: Path) -> None:
    db = make_db(tmp_path / "sem.duckdb", rows=200)
    cache = tmp_path / "cache.sqlite"
    flags = ("--backend", BACKEND, "--cache", str(cache), "--max-llm-calls-per-session", "25")
    with wire_server(db, *flags) as server:
        with psycopg.connect(server.dsn(), autocommit=True) as client:
            assert client.execute(rows_between(0, 10).encode()).fetchall() == [(5,)]
            assert client.execute(rows_between(10, 20).encode()).fetchall() == [(5,)]
            code, message = sqlstate_of(client, rows_between(20, 30))
            assert code == "54000" and "--max-llm-calls-per-session" in message
            assert "20 of its 25" in message
            assert calls(cache) == 20
            # answers the cache holds cost nothing: a rerun still fits
            assert client.execute(rows_between(0, 10).encode()).fetchall() == [(5,)]
            assert client.execute(rows_between(20, 25).encode()).fetchall() == [(3,)]
            assert calls(cache) == 25
        with psycopg.connect(server.dsn(), autocommit=True) as other:  # a session of its own
            assert other.execute(rows_between(30, 50).encode()).fetchall() == [(10,)]
            assert calls(cache) == 45


def test_per_day_cap_counts_every_session(tmp_path: Path) -> None:
    db = make_db(tmp_path / "sem.duckdb", rows=200)
    cache = tmp_path / "cache.sqlite"
    flags = ("--backend", BACKEND, "--cache", str(cache), "--max-llm-calls-per-day", "15")
    with (
        wire_server(db, *flags) as server,
        psycopg.connect(server.dsn(), autocommit=True) as first,
        psycopg.connect(server.dsn(), autocommit=True) as second,
    ):
        assert first.execute(rows_between(0, 10).encode()).fetchall() == [(5,)]
        code, message = sqlstate_of(second, rows_between(10, 20))
        assert code == "54000" and "--max-llm-calls-per-day" in message
        assert "midnight UTC" in message
        assert calls(cache) == 10
        assert second.execute(rows_between(10, 15).encode()).fetchall() == [(3,)]


def test_startup_options_apply_as_set(tmp_path: Path) -> None:
    db = make_db(tmp_path / "sem.duckdb", rows=200)
    cache = tmp_path / "cache.sqlite"
    flags = ("--backend", BACKEND, "--cache", str(cache), "--max-llm-calls-per-query", "50")
    options = (
        r"-c duckdb_sem.max_llm_calls=3 --TimeZone=Asia/Tokyo -c search_path=main,\ pg_catalog"
    )
    with wire_server(db, *flags) as server:
        with psycopg.connect(server.dsn(options=options), autocommit=True) as client:
            assert client.execute("SHOW duckdb_sem.max_llm_calls").fetchall() == [("3",)]
            assert client.execute("SHOW TimeZone").fetchall() == [("Asia/Tokyo",)]
            assert client.execute("SHOW search_path").fetchall() == [("main, pg_catalog",)]
            assert client.info.parameter_status("TimeZone") == "Asia/Tokyo"
            code, message = sqlstate_of(client, rows_between(0, 10))
            assert code == "54000" and "max_llm_calls=3" in message
            assert calls(cache) == 0
        # above the operator's cap at connect: refused as PostgreSQL refuses a bad -c value
        with pytest.raises(psycopg.OperationalError) as caught:
            psycopg.connect(server.dsn(options="-c duckdb_sem.max_llm_calls=51"))
        assert 'invalid value for parameter "duckdb_sem.max_llm_calls"' in str(caught.value)
        assert "--max-llm-calls-per-query" in str(caught.value)


@pytest.mark.parametrize(
    "options",
    [
        "-c dsem_no_such_setting=1",  # unrecognized configuration parameter (42704)
        "-c TimeZone=Mars/Base",  # invalid value (22023)
        "-c shared_buffers=1MB",  # fixed at server start (55P02)
        "-c application_name",  # -c name without a value
        "-x",  # not an option a session takes
    ],
)
def test_bad_startup_options_fail_as_in_postgresql(
    server: WireProcess, needs_pg: None, options: str
) -> None:
    with pytest.raises(psycopg.OperationalError) as from_pg:
        psycopg.connect(PG_DSN, options=options)
    with pytest.raises(psycopg.OperationalError) as from_server:
        psycopg.connect(server.dsn(options=options))
    expected = str(from_pg.value).split("FATAL:")[-1].strip().splitlines()[0]
    assert expected in str(from_server.value)


def test_a_session_keeps_its_limits_and_zone_when_its_cursor_is_replaced() -> None:
    """After a cancel the session gets a new DuckDB cursor; its budget and count stay."""
    from duckdb_sem.pgwire.database import Database, DatabaseOptions
    from duckdb_sem.pgwire.limits import Limiter, OperatorLimits, SessionLimits
    from duckdb_sem.pgwire.runner import Runner

    db = Database(DatabaseOptions(backend=BACKEND, cache="off"))
    try:
        limits = OperatorLimits(llm_calls_per_query=9, llm_calls_per_session=12)
        runner = Runner(db, limits=SessionLimits(Limiter(limits, db.settings)))
        runner.run_statement("SET duckdb_sem.max_llm_calls = 4", [])
        runner.run_statement("SET TimeZone = 'Asia/Tokyo'", [])
        session_quota = runner.con.budget.quotas[0]
        old = runner.con
        runner.execution.reconnect()
        assert runner.con is not old
        (row,), _ = runner.run_statement("SHOW duckdb_sem.max_llm_calls", []).take(None)
        assert row.endswith(b"\x00\x00\x00\x014")  # one DataRow: the value "4"
        assert runner.con.budget.max_llm_calls == 4  # bound when the next statement starts
        assert runner.con.budget.quotas[0] is session_quota
        zone = runner.con.duckdb.execute("SELECT current_setting('TimeZone')").fetchone()
        assert zone == ("Asia/Tokyo",)
        runner.con.close()
    finally:
        db.close()


def test_set_judges_names_as_postgresql(server: WireProcess, needs_pg: None) -> None:
    script = [
        "SET dsem_no_such_setting = 1",
        "RESET dsem_no_such_setting",
        "SET shared_buffers = '1MB'",
        "SET wal_sender_timeout = '5s'",
        "SET dsem.custom = 'x'",
        "SHOW dsem.custom",
        "SET extra_float_digits = 3",
    ]
    seen = []
    for dsn in (PG_DSN, server.dsn()):
        outcome = []
        with psycopg.connect(dsn, autocommit=True) as conn:
            for sql in script:
                try:
                    cur = conn.execute(sql.encode())
                    outcome.append(cur.fetchall() if cur.description else cur.statusmessage)
                except psycopg.Error as err:
                    outcome.append(err.sqlstate)
        seen.append(outcome)
    assert seen[0] == seen[1]
    assert seen[1][:3] == ["42704", "42704", "55P02"]
