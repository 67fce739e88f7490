"""Run a statement with a live progress line on stderr, and Ctrl-C that cancels cleanly.

The statement runs in a worker thread; the main thread renders DuckDB's own progress estimate
beside duckdb-sem's LLM counters (requests asked, answered by the backend, from the cache) and,
for a query on the SEU loop, ``con.query_progress()`` (batches done, estimated remaining cost);
it turns Ctrl-C into :meth:`SemConnection.interrupt`, which drops the query's queued LLM work.
"""

from __future__ import annotations

import threading
from typing import Any

from rich.console import Console

from duckdb_sem.connection import SemConnection
from duckdb_sem.errors import QueryCancelledError

__all__ = ["run_with_progress"]


def run_with_progress(
    con: SemConnection, sql: str, *, console: Console, quiet: bool = False
) -> Any:
    """Execute ``sql`` and return its result as a ``pyarrow.Table``."""
    outcome: dict[str, Any] = {}

    def work() -> None:
        try:
            outcome["table"] = con.execute(sql).arrow()
        except BaseException as err:  # noqa: BLE001 - re-raised in the main thread
            outcome["error"] = err

    worker = threading.Thread(target=work, name="duckdb-sem-query", daemon=True)
    worker.start()
    try:
        if quiet or not console.is_terminal:
            worker.join()
        else:
            with console.status("starting", spinner="dots") as status:
                while worker.is_alive():
                    worker.join(timeout=0.2)
                    status.update(_line(con))
    except KeyboardInterrupt:
        con.interrupt()
        worker.join(timeout=30)
        raise QueryCancelledError(
            "query cancelled by Ctrl-C; finished LLM calls stay cached"
        ) from None
    if "error" in outcome:
        raise outcome["error"]
    return outcome["table"]


def _line(con: SemConnection) -> str:
    stats = con.stats()
    try:
        pct = float(con.duckdb.query_progress())
    except Exception:  # noqa: BLE001 - progress is best-effort
        pct = -1.0
    done = f"{pct:5.1f}%" if pct >= 0 else "  ...  "
    return (
        f"{done}  LLM requests {stats.llm_calls}  (run {stats.physical_calls}, cached "
        f"{stats.cache_hits}, shared {stats.fused + stats.deduplicated})  SEUs {stats.seus}"
        + _plan_progress(con)
    )


def _plan_progress(con: SemConnection) -> str:
    """Batches done and estimated remaining cost of a query on the SEU loop ('' otherwise)."""
    try:
        p = con.query_progress()
    except Exception:  # noqa: BLE001 - progress is best-effort
        return ""
    if not getattr(p, "rows_total", 0) or getattr(p, "finished", False):
        return ""
    return (
        f"  batches {p.batches_done} ({p.rows_done:,}/{p.rows_total:,} rows), "
        f"est. remaining {p.estimated_remaining_cost:,.0f} tokens"
    )
