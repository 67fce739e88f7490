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
    thread per finisher, started with the first batch, waits for the quiet moment.
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
            self._thread = threading.Thread(target=self._wait, name="duckdb-sem-done",
                                            daemon=True)  # fmt: skip
            self._thread.start()

    def _wait(self) -> None:
        while True:
            with self._cond:
                while not self._closed and (not self._query or self._active):
                    self._cond.wait()
                if self._closed:
                    return
                left = self._last + self.quiet_s - self._clock()
                if left > 0:
                    self._cond.wait(left)
                    continue
                query, self._query = self._query, ""
            self._finish(query)
