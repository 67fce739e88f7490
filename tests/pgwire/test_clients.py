"""Real clients against a real wire server: psql, psycopg 3, SQLAlchemy."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa
from conftest import WireProcess, finished_calls, make_db, settled_calls, until_calls, wire_server

pytestmark = pytest.mark.integration

SEMANTIC = "SELECT id, text FROM reviews WHERE sem_filter('{text} is positive') ORDER BY id"
POSITIVE = [(1, "a good movie"), (3, "good acting, bad plot")]


def test_psql_runs_a_semantic_query(server: WireProcess) -> None:
    out = subprocess.run(
        ["psql", "-X", "-At", "-h", "127.0.0.1", "-p", str(server.port), "-U", "tester",
         "-d", server.dbname, "-c", SEMANTIC, "-c", r"\dt"],
        capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    lines = out.stdout.splitlines()
    assert lines[:2] == ["1|a good movie", "3|good acting, bad plot"]
    assert any("reviews" in line for line in lines[2:])


def test_psycopg_plain_parameterized_binary_and_server_cursor(server: WireProcess) -> None:
    with psycopg.connect(server.dsn()) as conn:
        assert conn.execute(SEMANTIC).fetchall() == POSITIVE
        got = conn.execute(
            "SELECT id FROM reviews WHERE id > %s AND sem_filter('{text} is positive')", [1]
        ).fetchall()
        assert got == [(3,)]
        for i in range(7):  # past psycopg's prepare threshold: named statements
            assert conn.execute("SELECT %s::INTEGER + 1", [i]).fetchone() == (i + 1,)
        row = conn.execute("SELECT %b::BIGINT, %b::TEXT, %b::DOUBLE", [5, "y", 1.5], binary=True)
        assert row.fetchone() == (5, "y", 1.5)
        typed = conn.execute(
            "SELECT true, 1.25::DECIMAL(5,2), DATE '2024-01-02', [1, 2], NULL::INTEGER"
        ).fetchone()
        assert typed is not None and typed[0] is True and str(typed[1]) == "1.25"
        assert str(typed[2]) == "2024-01-02" and typed[3] == [1, 2] and typed[4] is None
        with conn.cursor(name="semantic") as cur:
            cur.execute(SEMANTIC)
            assert cur.fetchmany(1) == POSITIVE[:1]
            assert cur.fetchall() == POSITIVE[1:]


def test_errors_have_sqlstates_and_session_survives(server: WireProcess) -> None:
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        cases = {
            "SELECT * FROM no_such_table": "42P01",
            "SELEC 1": "42601",
            "SELECT no_such_column FROM reviews": "42703",
            "SELECT id FROM reviews WHERE sem_filter('{nope} is positive')": "42703",
        }
        for sql, code in cases.items():
            with pytest.raises(psycopg.Error) as info:
                conn.execute(sql)
            assert info.value.sqlstate == code, (sql, info.value)
        assert conn.execute("SELECT count(*) FROM reviews").fetchone() == (4,)
    with psycopg.connect(server.dsn()) as conn:  # in a transaction: aborted until rollback
        with pytest.raises(psycopg.errors.UndefinedTable):
            conn.execute("SELECT * FROM no_such_table")
        with pytest.raises(psycopg.errors.InFailedSqlTransaction):
            conn.execute("SELECT 1")
        conn.rollback()
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_sqlalchemy_reflects_tables_and_queries(server: WireProcess) -> None:
    engine = sa.create_engine(
        f"postgresql+psycopg://tester@127.0.0.1:{server.port}/{server.dbname}"
    )
    try:
        inspector = sa.inspect(engine)
        assert "reviews" in inspector.get_table_names()
        columns = {c["name"]: c["type"] for c in inspector.get_columns("reviews")}
        assert isinstance(columns["id"], sa.Integer) and isinstance(columns["text"], sa.String)
        reviews = sa.Table(
            "reviews", sa.MetaData(), sa.Column("id", sa.Integer), sa.Column("text", sa.String)
        )
        with engine.connect() as conn:
            query = (
                sa.select(reviews.c.id)
                .where(reviews.c.id >= 1, sa.text("sem_filter('{text} is positive')"))
                .order_by(reviews.c.id)
            )
            assert conn.execute(query).scalars().all() == [1, 3]
    finally:
        engine.dispose()


def test_cancel_stops_llm_work_within_one_seu(tmp_path: Path) -> None:
    db = make_db(tmp_path / "slow.duckdb", rows=2000)
    # 64 rows per SEU, 300 ms per SEU: the whole query would take ~10 s.
    env = {"DUCKDB_SEM_BATCH_SIZE": "64"}
    backend = "test:?yes_if=good&latency_ms=300"
    cache = tmp_path / "calls.sqlite"
    with (
        wire_server(db, "--backend", backend, "--cache", str(cache), env=env) as server,
        psycopg.connect(server.dsn(), autocommit=True) as conn,
    ):
        errors: list[psycopg.Error] = []

        def run() -> None:
            try:
                conn.execute("SELECT count(*) FROM big WHERE sem_filter('{text} is positive')")
            except psycopg.Error as err:
                errors.append(err)

        worker = threading.Thread(target=run)
        worker.start()
        # cancelled while it runs (a cancel between statements does nothing): after its first
        # SEU, not after a fixed 1 s that a loaded machine may spend before the query starts
        until_calls(cache, running=worker.is_alive)
        at_cancel = finished_calls(cache)
        conn.cancel()
        worker.join(timeout=60)  # guards a hang: the whole query takes ~10 s
        assert not worker.is_alive()
        assert errors and isinstance(errors[0], psycopg.errors.QueryCanceled)
        # counted in calls, not seconds: the SEU in flight and at most one more sent before
        # the cancel was seen, where a cancel that waited for the query would make all 2000
        after = settled_calls(cache, quiet_s=1.0, within_s=30.0) - at_cancel
        assert after <= 2 * 64, f"{after} LLM calls after the cancel"
        assert conn.execute("SELECT count(*) FROM reviews").fetchone() == (4,)


def test_psycopg_sem_classify(server: WireProcess) -> None:
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT id, sem_classify('Verdict of {text}?', ['good', 'bad']) AS verdict "
            "FROM reviews ORDER BY id"
        ).fetchall()
        assert rows[:3] == [(1, "good"), (2, "bad"), (3, "good")]
        assert rows[3][1] in ("good", "bad")
        with pytest.raises(psycopg.Error, match="at least two distinct labels"):
            conn.execute("SELECT sem_classify('{text}', ['good']) FROM reviews")
