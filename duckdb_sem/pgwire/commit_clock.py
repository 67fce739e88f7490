"""Whether any session committed a change since a moment: what makes a savepoint replay exact.

DuckDB has no savepoints, so ``ROLLBACK TO SAVEPOINT`` (:mod:`.transaction`) rolls DuckDB back
and replays the transaction's writes up to the savepoint in a new transaction. The replay sees
the snapshot the writes first saw only if no other session committed a change in between: the
server's sessions are the only writers of its database (DuckDB holds the file), so counting
their commits tells.

:class:`CommitClock` counts each commit twice: when it starts (before any of its changes can
be seen) and when it has finished. A session notes the counts when its transaction begins
(:meth:`CommitClock.mark`); after a replay, :meth:`CommitClock.unchanged_since` is true only
if no commit started since, and none was under way at the mark (one under way then may become
visible later). A false answer costs a retry, never a wrong row: ``ROLLBACK TO`` then fails
with SQLSTATE 40001 and the transaction is aborted, as PostgreSQL aborts a serialization
failure.

Example:
    >>> clock = CommitClock()
    >>> mark = clock.mark()
    >>> clock.unchanged_since(mark)
    True
    >>> with clock.committing():
    ...     pass
    >>> clock.unchanged_since(mark)
    False
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = ["ClockMark", "CommitClock"]


@dataclass(frozen=True, slots=True)
class ClockMark:
    """The clock's counts at one moment: commits started and finished."""

    started: int
    finished: int


class CommitClock:
    """Counts the commits of every session of one database (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._started = 0
        self._finished = 0

    def mark(self) -> ClockMark:
        with self._lock:
            return ClockMark(self._started, self._finished)

    def start(self) -> None:
        """A commit (or an autocommit write) is about to run."""
        with self._lock:
            self._started += 1

    def finish(self) -> None:
        """The commit :meth:`start` announced has ended (committed, or failed)."""
        with self._lock:
            self._finished += 1

    @contextmanager
    def committing(self) -> Iterator[None]:
        self.start()
        try:
            yield
        finally:
            self.finish()

    def unchanged_since(self, mark: ClockMark | None) -> bool:
        """No commit started since ``mark``, and none was under way at ``mark`` (None: no
        mark was taken, so nothing is known: False)."""
        if mark is None:
            return False
        with self._lock:
            return mark.started == mark.finished == self._started == self._finished
