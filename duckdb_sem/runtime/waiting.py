"""Waiting for scheduled work as a query: the one loop every runtime caller uses.

A caller that submitted an SEU waits for its future in short slices, so a cancelled query
(``interrupt()``, a client's cancel request) stops waiting at once, drops its queued work on
the scheduler and raises :class:`~duckdb_sem.errors.QueryCancelledError`.
"""

from __future__ import annotations

import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TypeVar

from duckdb_sem.errors import QueryCancelledError
from duckdb_sem.runtime.context import QueryContext
from duckdb_sem.scheduler.seu import SchedulerClient

__all__ = ["wait_for"]

T = TypeVar("T")
_SLICE_S = 0.05


def wait_for(
    client: SchedulerClient, future: Future[T], query: QueryContext, *, waited: str | None = None
) -> T:
    """``future``'s result; ``waited``: the ``QueryStats`` field the seconds are added to."""
    started = time.monotonic()
    try:
        while True:
            if query.cancelled.is_set():
                client.cancel(query.query_id)
                raise QueryCancelledError(f"query {query.query_id} was cancelled")
            try:
                return future.result(timeout=_SLICE_S)
            except FutureTimeout:
                continue
    finally:
        if waited is not None:
            query.add(**{waited: time.monotonic() - started})
