"""A session's DuckDB connection and the statement running on it.

:class:`Execution` runs SQL that is not a session command (after the catalog and
PostgreSQL-source rewrites) into a :class:`~duckdb_sem.pgwire.results.Result`, keeps the one
open Arrow reader DuckDB allows per connection (a result streams from it; before the next
statement uses the connection, what a suspended portal has not sent yet is read into memory:
:meth:`Execution.park_open`), and makes cancellation work across threads:
:meth:`Execution.cancel` (called from the thread that received a CancelRequest) marks the
running query cancelled, drops its SEUs from the scheduler and interrupts DuckDB, and
:meth:`Execution.translated` turns the resulting DuckDB error back into the duckdb-sem error
that caused it (``QueryCancelledError``, SQLSTATE 57014, for a cancel).

A portal closed before its end (``Close``, a ``Sync`` ending it, the client going away) is
stopped by :meth:`Execution.discard`: its query's queued SEUs are dropped and its stream
closed, so its LLM work ends with the SEU in flight instead of running when the next statement
parks the portal.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

import duckdb
import pyarrow as pa

from duckdb_sem.errors import QueryCancelledError, SemError
from duckdb_sem.pgwire import messages as m
from duckdb_sem.pgwire.catalog import rewrite_catalog
from duckdb_sem.pgwire.database import Database
from duckdb_sem.pgwire.results import Result
from duckdb_sem.pgwire.statements import Parsed
from duckdb_sem.runtime.context import QueryContext

__all__ = ["Execution"]


class Execution:
    """Owns one session's connection (``con``); see the module docstring."""

    def __init__(
        self, db: Database, *, guard: Callable[[], AbstractContextManager[None]] | None = None
    ) -> None:
        self.db = db
        self.con = db.session()
        #: entered while a statement runs (the server's watch for a client that went away)
        self._guard = guard or nullcontext
        self._lock = threading.Lock()
        self._running = False
        self._query: QueryContext | None = None
        self._open: pa.RecordBatchReader | None = None  # DuckDB allows one open result
        self._open_result: Result | None = None  # the result streaming from ``_open``
        #: ``_open`` is an autocommit write's (RETURNING): the commit clock's, until closed
        self._committing = False

    def run_sql(
        self, sql: str, params: list[Any], parsed: Parsed, *, announce: bool = False
    ) -> Result:
        """Run one statement that is not a session command (``parsed``: DuckDB's reading).
        ``announce``: it commits (an autocommit write), so the server's commit clock counts
        it from before it runs until its result is closed."""
        self.park_open()
        query, tree = self.db.rewrite_parsed(rewrite_catalog(sql), self.con)
        if announce:
            self.db.commits.start()
        try:
            with self.busy():
                if parsed.returns_rows:
                    rel = self.translated(
                        lambda: self.con.sql(query, params=params or None, tree=tree)
                    )
                    reader = self.translated(lambda: rel.to_arrow_reader(1024))
                    self._open = reader
                    result = Result.of_rows(parsed.row_tag, reader.schema, self._batches(reader))
                    self._open_result = result
                    self._committing, announce = announce, False  # ends with the result
                    return result
                self.translated(lambda: self.con.execute(query, params or None))
                rows = self.translated(self.con.fetchall)
        finally:
            if announce:
                self.db.commits.finish()
        # DuckDB answers INSERT/UPDATE/DELETE/COPY with one row: the count of rows changed.
        count = rows[0][0] if rows and rows[0] and isinstance(rows[0][0], int) else None
        return Result.command(parsed.tag(count))

    def describe_sql(self, sql: str, count: int) -> list[m.Field]:
        """The fields a query with ``count`` parameters would return (the session checks it reads)."""
        self.park_open()
        query = self.db.rewrite(rewrite_catalog(sql), self.con)
        with self.busy():
            rel = self.translated(lambda: self.con.sql(query, params=[None] * count or None))
            schema = self.translated(lambda: rel.limit(0).to_arrow_table().schema)
        return Result.of_rows("SELECT", schema, iter(())).described()

    def _batches(self, reader: pa.RecordBatchReader) -> Iterator[pa.RecordBatch]:
        while True:
            try:
                batch = self.translated(reader.read_next_batch)
            except StopIteration:
                self._finish_commit()  # DuckDB committed it with its last row
                return
            yield batch

    def _finish_commit(self) -> None:
        if self._committing:
            self._committing = False
            self.db.commits.finish()

    def park_open(self) -> None:
        """Free the connection for another statement without breaking a suspended portal.

        DuckDB keeps one open result per connection and the next query invalidates it, so
        the rows the open result has not sent yet (an ``Execute`` with a row limit that
        stopped early) are read into memory first and the portal goes on from there. Only
        a client interleaving statements with an unfinished portal pays that memory."""
        result = self._open_result
        if result is not None and result.batches is not None:
            batches = result.batches
            rest: list[pa.RecordBatch] = []
            try:
                with self.busy():
                    self.translated(lambda: rest.extend(batches))
                result.batches = iter(rest)
            except Exception as err:  # noqa: BLE001 - the portal's failure, not the next statement's
                result.batches = itertools.chain(rest, _failing(err))  # its rows, then its error
        self.close_open()

    def close_open(self) -> None:
        self._open_result = None
        try:
            if self._open is not None:
                self._open.close()
                self._open = None
        finally:
            self._finish_commit()

    def discard(self, result: Result | None) -> None:
        """Stop ``result``, which nobody will read (its portal was closed): when it is the open
        one, its query's queued SEUs are dropped and its stream and the connection's pending
        result closed, so no LLM work is done for the rows it did not send."""
        if result is None or result is not self._open_result:
            return  # finished, or parked (its rows are in memory): nothing runs for it
        with self._lock:
            query, self._query = self._query, None  # a later failure is not "cancelled"
        if query is not None:
            query.cancelled.set()  # an SEU loop still running stops at its next boundary
            self.db.engine.cancel(query.query_id)
        self.close_open()
        with contextlib.suppress(duckdb.Error, SemError):
            self.con.discard_results()  # a planned stream's transaction ends with it

    def close(self) -> None:
        """The session ended: stop what still streams, then close the connection."""
        self.discard(self._open_result)
        self.con.close()

    def reconnect(self) -> None:
        """A fresh connection: an interrupted DuckDB result can stay pending on the old one."""
        self.con.close()
        self.con = self.db.session()

    # -- cancellation ------------------------------------------------------------------------
    def on_query(self, query: QueryContext) -> None:
        with self._lock:
            self._query = query

    @contextmanager
    def busy(self) -> Iterator[None]:
        with self._lock:
            self._running = True
        try:
            with self._guard():
                yield
        finally:
            with self._lock:
                self._running = False

    def cancel(self) -> None:
        """Stop the running statement (from the thread that received a CancelRequest)."""
        with self._lock:
            if not self._running:
                return
            query = self._query
        if query is not None:
            query.cancelled.set()
            self.db.engine.cancel(query.query_id)
        self.con.duckdb.interrupt()

    def translated(self, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except duckdb.Error as err:
            cause = self.db.routed.last_error
            if cause is not None:
                self.db.routed.last_error = None
                raise cause from err
            query = self._query
            if query is not None and query.cancelled.is_set():
                raise QueryCancelledError(
                    "canceling statement due to user request (its LLM work was dropped)"
                ) from err
            raise


def _failing(err: Exception) -> Iterator[pa.RecordBatch]:
    """Batches that fail with ``err``: a parked portal's error, raised when it is read again."""
    raise err
    yield  # a generator
