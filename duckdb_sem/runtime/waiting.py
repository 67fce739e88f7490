"""Waiting for scheduled work as a query: the one loop every runtime caller uses.

A caller submits an SEU through :func:`wait_for`, which checks the query's cancellation flag
*before* submitting (an SEU of a query interrupted meanwhile is never sent, so it cannot start
on a free replica) and then waits for its future in short slices, so a cancelled query
(``interrupt()``, a client's cancel request) stops waiting at once, drops its queued work on
the scheduler and raises :class:`~duckdb_sem.errors.QueryCancelledError`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TypeVar

from duckdb_sem.runtime.context import QueryContext
from duckdb_sem.scheduler.seu import SchedulerClient

__all__ = ["wait_for"]

T = TypeVar("T")
_SLICE_S = 0.05


def wait_for(
    client: SchedulerClient,
    submit: Callable[[], Future[T]],
    query: QueryContext,
    *,
    waited: str | None = None,
) -> T:
    """The result of the future ``submit()`` returns, unless the query is cancelled before it
    is submitted or while it waits; ``waited``: the ``QueryStats`` field the seconds are
    added to."""
    started = time.monotonic()
    try:
        _stop_if_cancelled(client, query)
        future = submit()
        while True:
            _stop_if_cancelled(client, query)
            try:
                return future.result(timeout=_SLICE_S)
            except FutureTimeout:
                continue
    finally:
        if waited is not None:
            query.add(**{waited: time.monotonic() - started})


def _stop_if_cancelled(client: SchedulerClient, query: QueryContext) -> None:
    if query.cancelled.is_set():
        client.cancel(query.query_id)
        query.raise_if_cancelled()
