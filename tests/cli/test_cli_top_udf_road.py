"""``duckdb-sem top`` marks a query of the UDF road (``install(con)``) done when it ends.

DuckDB runs such a statement and calls the UDFs batch by batch; nothing tells Python that the
statement ended, so the session marks the query done when it starts the next one, or once no
UDF batch has run for a moment (``runtime/finish.py``). Before, the query showed ``idle`` with
work left until the scheduler forgot it, 120 s later.
"""

from __future__ import annotations

import io
import time
from collections.abc import Iterator

import duckdb
import pytest
from rich.console import Console

import duckdb_sem
from duckdb_sem.backends.rules import RuleBackend
from duckdb_sem.cli.top import render
from duckdb_sem.runtime.finish import QuietFinisher
from duckdb_sem.surface.udfs import SemSession

QUERY = "SELECT count(*) FROM t WHERE sem_filter('{0} is good?', x)"


@pytest.fixture
def plain() -> Iterator[tuple[duckdb.DuckDBPyConnection, SemSession]]:
    con = duckdb.connect()
    session = duckdb_sem.install(con, backend=RuleBackend(yes_if=["good"]), cache="off")
    con.execute("CREATE TABLE t AS SELECT 'good ' || range::VARCHAR AS x FROM range(3000)")
    yield con, session
    con.close()
    session.release()


def _states(session: SemSession) -> dict[str, str]:
    status = session.engine.models.default.status()  # type: ignore[attr-defined]
    return {q["query_id"]: q["state"] for q in status["queries"]}  # type: ignore[attr-defined]


def _top(session: SemSession) -> str:
    out = io.StringIO()
    status = session.engine.models.default.status()  # type: ignore[attr-defined]
    Console(file=out, width=80, force_terminal=False, color_system=None).print(render(status))
    return out.getvalue()


def test_a_quiet_udf_road_query_shows_done(
    plain: tuple[duckdb.DuckDBPyConnection, SemSession],
) -> None:
    con, session = plain
    session.finisher.quiet_s = 0.2
    assert con.sql(QUERY).fetchall() == [(3000,)]
    qid = session.query.query_id
    deadline = time.monotonic() + 10
    while _states(session).get(qid) != "done" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _states(session)[qid] == "done"
    line = next(line for line in _top(session).splitlines() if line.lstrip().startswith(qid[:8]))
    assert " done " in line and " - " in line  # nothing left


def test_the_next_query_marks_the_last_one_done_at_once(
    plain: tuple[duckdb.DuckDBPyConnection, SemSession],
) -> None:
    con, session = plain
    session.finisher.quiet_s = 3600.0  # never quiet within the test
    con.sql(QUERY).fetchall()
    first = session.query.query_id
    assert _states(session)[first] == "idle"  # not yet known to be over
    session.new_query()
    assert _states(session)[first] == "done"
    # the same query, asked again, is live again (a later batch of a slow reader)
    con.sql(QUERY.replace("good?", "fine?")).fetchall()
    assert _states(session)[session.query.query_id] == "idle"


def test_a_batch_running_is_never_marked_done() -> None:
    now = [0.0]
    finished: list[str] = []
    finisher = QuietFinisher(finished.append, quiet_s=0.01, clock=lambda: now[0])
    with finisher.running("q1"):
        now[0] = 100.0  # long past quiet, but the batch is still running
        time.sleep(0.05)
        assert finished == []
    deadline = time.monotonic() + 5
    while not finished and time.monotonic() < deadline:
        now[0] += 1.0
        time.sleep(0.01)
    assert finished == ["q1"]
    with finisher.running("q2"):
        pass
    finisher.close()  # the pending query is done with the session
    assert finished == ["q1", "q2"]
