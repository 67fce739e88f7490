"""The progress line moves within an SEU: a 20-row query (one SEU) shows rows and calls as
each backend batch answers, from the runtime's ``Progress`` events, not at the end alone."""

from __future__ import annotations

import duckdb_sem
from duckdb_sem.backends.rules import RuleBackend
from duckdb_sem.cli.progress import LiveProgress, PlanShare, progress_line
from duckdb_sem.runtime.context import Progress
from duckdb_sem.runtime.progress import QueryProgress

SQL = "SELECT id FROM r WHERE sem_filter('Is {text} fine?')"


def _connection(spec: str | RuleBackend) -> duckdb_sem.SemConnection:
    con = duckdb_sem.connect(backend=spec, cache="off")
    con.execute("CREATE TABLE r AS SELECT i AS id, CASE WHEN i % 2 = 0 THEN 'good' ELSE 'bad' "
                "END || ' film ' || i AS text FROM range(20) t(i)")  # fmt: skip
    return con


def test_a_20_row_query_reports_every_backend_batch() -> None:
    # 5 backend batches of 4, each heard however late the listener is attached (SEUFuture)
    # a backend object: with the spec string, a connection another test left open with the
    # same model (max_batch 256) would lend its backend, and the 20 rows be one batch
    con = _connection(RuleBackend(yes_if=["good"], max_batch=4, latency_ms=30))
    events: list[Progress] = []
    con.on_progress = events.append
    rows = con.sql(SQL).fetchall()
    con.close()
    assert len(rows) == 10
    mine = [e for e in events if "sem_filter" in e.operator]
    assert [(e.rows_done, e.rows_total, e.seus) for e in mine] == [
        (4, 20, 0),
        (8, 20, 0),
        (12, 20, 0),
        (16, 20, 0),
        (20, 20, 1),
    ]


def test_live_rows_and_calls_move_within_the_seu() -> None:
    live = LiveProgress()
    running = QueryProgress(query_id="q", batches_done=0, rows_done=0, rows_total=20,
                            rows_in_flight=20, estimated_remaining_cost=100.0)  # fmt: skip
    assert live.rows(running) == 0 and live.answered() == 0
    live(Progress("q", "sem_filter#1", 8, 20, 0))
    assert live.rows(running) == 8 and live.answered() == 8
    share, _ = PlanShare().update(running, 0.0, live.rows(running))
    assert share == 0.4  # by rows, though con.stats() has counted no token yet
    live(Progress("q", "sem_filter#1", 20, 20, 1))
    assert live.answered() == 0  # the SEU is done: con.stats() counts its calls now
    after = QueryProgress(query_id="q", batches_done=1, rows_done=20, rows_total=20)
    assert live.rows(after) == 20  # a new SEU boundary: the in-flight share starts again


def test_listeners_already_set_still_get_every_event() -> None:
    heard: list[Progress] = []
    live = LiveProgress(heard.append)
    live(Progress("q", "sem_map#1", 1, 2, 0))
    assert [e.rows_done for e in heard] == [1] and live.events == 1


def test_the_progress_line_counts_the_answers_in_flight() -> None:
    con = _connection("test:?yes_if=good")
    con.sql(SQL).fetchall()
    live = LiveProgress()
    before = progress_line(con, live=live)
    live(Progress("q", "sem_filter#1", 3, 7, 0))
    after = progress_line(con, live=live)
    con.close()
    assert "LLM 20 asked" in before and "LLM 23 asked" in after
