"""``duckdb-sem top`` laid out for 80 columns: one line per query, nothing wrapped."""

from __future__ import annotations

import io

from rich.console import Console

from duckdb_sem.backends.rules import RuleBackend
from duckdb_sem.cli.top import render
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import OperatorKind
from duckdb_sem.scheduler.core import Scheduler
from duckdb_sem.scheduler.executor import ManualExecutor
from duckdb_sem.scheduler.seu import SEU


def _status() -> dict[str, object]:
    """A real scheduler's status with three live queries whose work is still queued."""
    backend = RuleBackend(spec="test:?yes_if=good&latency_ms=0&max_batch=256&a_long_option=1")
    scheduler = Scheduler([backend], executor=ManualExecutor())
    for i, remaining in enumerate((123_456.0, 7_800.0, 12.0)):
        requests = tuple(build_request(OperatorKind.FILTER, f"row {i} {j}") for j in range(5))
        scheduler.submit(SEU(f"query-{i}-with-a-long-id", "sem_filter#1", requests,
                             remaining_cost=remaining, connection=f"connection-{i}-of-pgwire"))  # fmt: skip
    status = scheduler.status()
    scheduler.close()
    return status


def _lines(width: int) -> list[str]:
    out = io.StringIO()
    Console(file=out, width=width, force_terminal=False, color_system=None).print(
        render(_status(), width=width)
    )
    return out.getvalue().splitlines()


def test_top_fits_80_columns_with_one_line_per_query() -> None:
    lines = _lines(80)
    assert max(len(line) for line in lines) <= 80
    rows = [line for line in lines if line.lstrip().startswith("query-")]
    assert len(rows) == 3  # one line each: nothing wrapped onto a second line
    # shortest remaining work first, each with its state, remaining cost and SEUs on its line
    assert rows[0].lstrip().startswith("query-2") and " 12 " in rows[0]
    assert "7.8k" in rows[1] and rows[2].lstrip().startswith("query-0") and "123k" in rows[2]
    assert all("queued" in row or "waiting" in row or "running" in row for row in rows), rows
    header = "\n".join(lines[:3])
    assert "policy srtf" in header and "in flight 15 req" in header


def test_a_wide_terminal_also_shows_connections() -> None:
    lines = _lines(160)
    assert any("connection-0-of-pgwire" in line for line in lines)
    assert not any("connection-0" in line for line in _lines(80))


def test_a_finished_query_shows_done_with_nothing_left_below_the_live_ones() -> None:
    backend = RuleBackend(spec="test:?yes_if=good")
    executor = ManualExecutor()
    scheduler = Scheduler([backend], executor=executor)
    for qid in ("finished-q", "live-q"):
        requests = (build_request(OperatorKind.FILTER, f"row of {qid}"),)
        scheduler.submit(SEU(qid, "sem_filter#1", requests, remaining_cost=1_400.0))
    first = executor.started[0]
    executor.finish(first, backend.complete(list(first.requests)))
    scheduler.finish_query(first.query_id)
    status = scheduler.status()
    scheduler.close()
    out = io.StringIO()
    Console(file=out, width=80, force_terminal=False, color_system=None).print(render(status))
    rows = [line for line in out.getvalue().splitlines() if "-q " in line]
    live = ({"finished-q", "live-q"} - {first.query_id}).pop()
    assert rows[0].lstrip().startswith(live) and "1.4k" in rows[0]
    assert rows[1].lstrip().startswith(first.query_id) and " done " in rows[1]
    assert "1.4k" not in rows[1]  # was `idle ... left 1.4k`
