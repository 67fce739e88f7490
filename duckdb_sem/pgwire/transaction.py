"""A session's transaction as PostgreSQL 15 runs it, on DuckDB, which has no savepoints.

DuckDB transactions are flat, so savepoints are kept here: the transaction logs each statement
that wrote (SQL and parameters), a savepoint remembers the log's length, and ``ROLLBACK TO``
rolls DuckDB back, begins again and replays the log up to that savepoint. The outcome is
PostgreSQL's: work after the savepoint is undone, work before it kept, and a failed
transaction is usable again after ``ROLLBACK TO``. The cost is re-running the earlier writes
(their LLM calls come from the cache when it is on); a write whose result depends on volatile
functions (``random()``, ``now()``) can come out different on replay.

Example (psycopg's nested ``transaction()``)::

    BEGIN; INSERT 1; SAVEPOINT s; INSERT 2; ROLLBACK TO SAVEPOINT s; COMMIT   -> [1]
    BEGIN; INSERT 1; SAVEPOINT s; <error>; ROLLBACK TO SAVEPOINT s; INSERT 3; COMMIT -> [1, 3]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from duckdb_sem.errors import TransactionStateError

__all__ = ["Transaction"]

#: (sql, params) of one logged write
Write = tuple[str, list[Any]]


@dataclass
class Transaction:
    """``status`` is the ReadyForQuery byte: ``I`` idle, ``T`` in a block, ``E`` failed."""

    status: bytes = b"I"
    log: list[Write] = field(default_factory=list)
    savepoints: list[tuple[str, int]] = field(default_factory=list)

    def begin(self) -> None:
        self.status = b"T"
        self.log.clear()
        self.savepoints.clear()

    def end(self) -> None:
        self.status = b"I"
        self.log.clear()
        self.savepoints.clear()

    def failed(self) -> None:
        if self.status == b"T":
            self.status = b"E"

    def wrote(self, sql: str, params: list[Any]) -> None:
        if self.status == b"T":
            self.log.append((sql, list(params)))

    def savepoint(self, name: str) -> None:
        self._require_block("SAVEPOINT")
        self.savepoints.append((name, len(self.log)))

    def release(self, name: str) -> None:
        self._require_block("RELEASE SAVEPOINT")
        index = self._find(name)
        del self.savepoints[index:]

    def rollback_to(
        self, name: str, restart: Callable[[], None], run: Callable[[Write], None]
    ) -> None:
        """Undo the work after savepoint ``name``: ``restart`` DuckDB's transaction, replay."""
        self._require_block("ROLLBACK TO SAVEPOINT")
        index = self._find(name)
        length = self.savepoints[index][1]
        del self.savepoints[index + 1 :]
        kept = self.log[:length]
        restart()
        self.log = []
        self.status = b"T"
        for write in kept:
            run(write)
            self.log.append(write)

    def _require_block(self, what: str) -> None:
        if self.status == b"I":
            raise TransactionStateError(
                f"{what} can only be used in transaction blocks: BEGIN first", sqlstate="25P01"
            )

    def _find(self, name: str) -> int:
        for index in range(len(self.savepoints) - 1, -1, -1):
            if self.savepoints[index][0] == name:
                return index
        raise TransactionStateError(f'savepoint "{name}" does not exist', sqlstate="3B001")
