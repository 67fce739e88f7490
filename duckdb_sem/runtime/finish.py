"""Telling the schedulers that a query is done, so ``duckdb-sem top`` shows it ``done``.

A planned query knows when its run ends (the SEU loop calls :func:`finish_query`). A query on
the UDF road does not: DuckDB drives the statement and calls the UDFs batch by batch, and
nothing tells Python that the statement ended. :class:`QuietFinisher` marks such a query done
when its session starts the next query, or when no UDF of it has run for :data:`DONE_AFTER_S`
(DuckDB calls a statement's UDFs back to back, so a quiet query has ended, or waits on its
reader; a later batch shows it live again). Without this, a finished UDF-road query showed
``idle`` with work left until the scheduler forgot it, two minutes later.

Example:
    ``finisher.running(query_id)`` around each UDF batch; ``finisher.finish_now()`` when the
    session starts a new query; ``finisher.close()`` with the session.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator

from duckdb_sem.errors import SemError

__all__ = ["DONE_AFTER_S", "QuietFinisher", "finish_query"]

log = logging.getLogger(__name__)

DONE_AFTER_S = 2.0  # a UDF-road query with no UDF batch for this long is shown done


def finish_query(clients: Iterable[object], query_id: str) -> None:
    """Tell each scheduler client that ``query_id`` is done (one without ``finish_query`` is
    skipped; a sidecar that cannot be told forgets the query later)."""
    if not query_id:
        return
    for client in clients:
        finish = getattr(client, "finish_query", None)
        if finish is None:
            continue
        try:
            finish(query_id)
        except SemError as err:
            log.debug("could not mark query %s done: %s", query_id, err)


class QuietFinisher:
    """Marks a UDF-road query done once it is quiet (see the module docstring).

    ``finish(query_id)`` tells the schedulers; ``clock`` is injectable for tests. One daemon
    thread per finisher, started with the first batch, waits for the quiet moment. The thread
    holds the finisher weakly: a session dropped without ``close()`` is collected (with its
    scheduler share, :mod:`duckdb_sem.scheduler.shared`), and the thread then ends.
    """

    def __init__(
        self,
        finish: Callable[[str], None],
        *,
        quiet_s: float = DONE_AFTER_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.quiet_s = quiet_s
        self._finish = finish
        self._clock = clock
        self._cond = threading.Condition()
        self._query = ""  # the query whose batches ran and that is not yet finished
        self._active = 0  # its batches running now
        self._last = 0.0
        self._closed = False
        self._thread: threading.Thread | None = None

    @contextlib.contextmanager
    def running(self, query_id: str) -> Iterator[None]:
        """Around one UDF batch of ``query_id`` (another query's pending one finishes first)."""
        self._switch(query_id)
        with self._cond:
            self._active += 1
        try:
            yield
        finally:
            with self._cond:
                self._active -= 1
                self._last = self._clock()
                self._start()
                self._cond.notify_all()

    def finish_now(self) -> None:
        """The session starts another query: the pending one (if any) is done."""
        self._switch("")

    def close(self) -> None:
        self.finish_now()
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _switch(self, query_id: str) -> None:
        with self._cond:
            previous = self._query if self._query != query_id else ""
            self._query = query_id
        if previous:
            self._finish(previous)

    def _start(self) -> None:
        if self._thread is None and not self._closed:
            self._thread = threading.Thread(
                target=_wait, args=(weakref.ref(self), self._cond), name="duckdb-sem-done",
                daemon=True,
            )  # fmt: skip
            weakref.finalize(self, _wake, self._cond)
            self._thread.start()


_IDLE_CHECK_S = 5.0  # how often an idle waiter looks whether its finisher is gone


def _wait(ref: weakref.ref[QuietFinisher], cond: threading.Condition) -> None:
    """The finisher's thread: finish its query once quiet; end with the finisher (closed, or
    collected). It holds the finisher only while it reads it, never while it waits."""
    while True:
        with cond:
            me = ref()
            if me is None or me._closed:
                return
            if not me._query or me._active:
                wait: float | None = _IDLE_CHECK_S
            else:
                left = me._last + me.quiet_s - me._clock()
                wait = left if left > 0 else None
            if wait is not None:
                del me
                cond.wait(wait)
                continue
            query, me._query = me._query, ""
            finish = me._finish
            del me
        finish(query)
        del finish


def _wake(cond: threading.Condition) -> None:
    """The finisher was collected: wake its thread to end (not if the lock is busy: the thread
    then sees it within :data:`_IDLE_CHECK_S`)."""
    if cond.acquire(blocking=False):
        try:
            cond.notify_all()
        finally:
            cond.release()
