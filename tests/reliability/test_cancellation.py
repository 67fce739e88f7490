"""Cancellation from Python and from the CLI stops LLM work within one SEU; others go on.

The wire server's cancel request is proved in ``tests/pgwire/test_clients.py``
(``test_cancel_stops_llm_work_within_one_seu``).
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import duckdb
import pytest

import duckdb_sem
from duckdb_sem.errors import QueryCancelledError
from duckdb_sem.llm.request import Completion, LLMRequest
from duckdb_sem.scheduler.core import Scheduler

SEU_ROWS = 8
LATENCY_S = 0.1
SPEC = f"test:?yes_if=good&latency_ms={LATENCY_S * 1000:g}&max_batch={SEU_ROWS}"


def test_interrupt_stops_within_one_seu_frees_the_queue_and_others_continue(
    tmp_path: Path,
) -> None:
    cache = str(tmp_path / "c.sqlite")
    # same spec and cache: both connections share one scheduler (and its queue)
    con_a = duckdb_sem.connect(backend=SPEC, cache=cache, batch_size=SEU_ROWS)
    con_b = duckdb_sem.connect(backend=SPEC, cache=cache, batch_size=SEU_ROWS)
    scheduler = con_a.session.engine.client.scheduler  # type: ignore[attr-defined]
    assert isinstance(scheduler, Scheduler)
    assert scheduler is con_b.session.engine.client.scheduler  # type: ignore[attr-defined]
    backend = scheduler.backends[0]
    answered: list[tuple[float, str]] = []
    inner = backend.complete

    def recording(requests: Sequence[LLMRequest]) -> list[Completion]:
        out = inner(requests)
        answered.extend((time.monotonic(), r.row) for r in requests)
        return out

    backend.complete = recording  # type: ignore[method-assign]
    outcome: dict[str, object] = {}

    def run(name: str, con: duckdb_sem.SemConnection, sql: str) -> None:
        try:
            outcome[name] = con.sql(sql).fetchall()
        except BaseException as err:  # noqa: BLE001 - the test inspects it
            outcome[name] = err

    # long enough (12 s at 4 batches of 8 per 0.1 s) that the interrupt always lands mid-query,
    # however warm the process is
    a_sql = "SELECT sem_filter('{0} ok', 'a-' || i::VARCHAR) FROM range(4000) t(i)"
    b_sql = (
        "SELECT i, sem_filter('{0} ok', CASE WHEN i % 2 = 0 THEN 'good b-' ELSE 'b-' END "
        "|| i::VARCHAR) FROM range(48) t(i) ORDER BY i"
    )
    a = threading.Thread(target=run, args=("a", con_a, a_sql))
    b = threading.Thread(target=run, args=("b", con_b, b_sql))
    a.start()
    while sum(1 for _, row in answered if row.startswith("a-")) < 2 * SEU_ROWS:
        time.sleep(0.01)
    b.start()
    time.sleep(3 * LATENCY_S)
    query_a = con_a.session.query.query_id
    interrupted = time.monotonic()
    con_a.interrupt()
    a.join(timeout=10)
    stopped = time.monotonic() - interrupted
    assert isinstance(outcome["a"], QueryCancelledError | duckdb.InterruptException)
    # Generous on purpose (a 2-core machine shared with other work): the bound that matters is
    # the count of A's requests answered after the interrupt, below; this catches a hang.
    assert stopped < 5.0, f"interrupt took {stopped:.2f}s"
    # nothing of A stays queued: its slots went to others at once
    assert all(item.query_id != query_a for item in scheduler.policy.items())
    b.join(timeout=30)
    assert outcome["b"] == [(i, i % 2 == 0) for i in range(48)]  # B went on, unharmed
    late = [row for t, row in answered if row.startswith("a-") and t > interrupted + 0.01]
    assert len(late) <= SEU_ROWS, f"{len(late)} requests of A ran after the interrupt"
    con_a.close()
    con_b.close()


@pytest.mark.integration
def test_ctrl_c_in_the_cli_cancels_and_keeps_finished_work(tmp_path: Path) -> None:
    cache = tmp_path / "cli.sqlite"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUCKDB_SEM_")}
    env["DUCKDB_SEM_BATCH_SIZE"] = str(SEU_ROWS)
    sql = "SELECT count(*) FROM range(2000) t(i) WHERE sem_filter('{0} ok', 'row ' || i::VARCHAR)"
    code = "from duckdb_sem.cli.main import main; main()"
    cmd = [sys.executable, "-c", code, "query", "--backend", SPEC, "--cache", str(cache), sql]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not _cached(cache):
            time.sleep(0.05)
        assert _cached(cache), "the query did not start"
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        elapsed = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1
    assert "QueryCancelledError" in err and "Ctrl-C" in err, err[-2000:]
    # generous (a shared 2-core machine) and only a hang check: the cached count below is
    # what shows the rest of the query never ran
    assert elapsed < 10.0, f"Ctrl-C took {elapsed:.2f}s"
    done = _cached(cache)
    assert 0 < done < 2000  # finished calls stayed cached; the rest never ran


def _cached(cache: Path) -> int:
    if not cache.exists():
        return 0
    try:
        with sqlite3.connect(cache, timeout=10) as db:
            (n,) = db.execute("SELECT count(*) FROM completions").fetchone()
    except sqlite3.OperationalError:  # created but no table yet
        return 0
    return int(n)
