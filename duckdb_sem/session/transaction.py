"""The one transaction a semantic statement runs in.

A planned statement runs many DuckDB queries on the session's connection (samples, counts,
one window of the driving scan per SEU, the region over each batch, the sink, the writes of a
``CREATE TABLE ... AS``). In autocommit each of them would be a transaction of its own, so a
commit made by another session between two of them would be half visible. So, as DuckDB runs
one statement in one transaction:

- inside the user's explicit transaction (``BEGIN`` ... ``COMMIT``), the statement simply runs
  in it: it sees the transaction's own inserts, updates and deletes, and its snapshot;
- in autocommit, the statement opens a transaction of its own before its first query and
  commits it after its last row (or rolls it back when it fails).

A statement that fails inside the user's transaction leaves that transaction aborted, as a
failing DuckDB statement does ("Current transaction is aborted (please ROLLBACK)"): a
half-done ``INSERT ... SELECT`` must not be committed later by accident.

Whether a transaction is open is asked of DuckDB itself (``txid_current()`` is the same for two
statements inside one transaction and new for each in autocommit); trying ``BEGIN`` would
abort the user's transaction when one is open.

Ending a failed statement's transaction must not fail itself: DuckDB refuses ``ROLLBACK``
while a result of the connection is still open ("connection has an open result"), and a
failure can leave one behind (a reader opened before the error, held by the traceback's
frames). So the open results the failure holds are released first, and should DuckDB still
refuse, the connection is marked and its next statement ends the transaction before it runs
(:func:`settle`): a failed statement never leaves an autocommit session inside a transaction,
where the next acknowledged write would be lost with it.
"""

from __future__ import annotations

import gc
import logging
import traceback
import weakref
from collections.abc import Callable
from typing import Any

import duckdb

__all__ = [
    "StatementTransaction",
    "abort_user_transaction",
    "in_transaction",
    "settle",
    "transaction_id",
]

log = logging.getLogger(__name__)

#: connections whose failed statement's transaction DuckDB refused to end (an open result);
#: the value says how: ``True`` roll back our own transaction, ``False`` abort the user's
_UNSETTLED: weakref.WeakKeyDictionary[Any, tuple[bool, str]] = weakref.WeakKeyDictionary()


def transaction_id(con: Any) -> int | None:
    """The id of the explicit transaction ``con`` (a DuckDB connection) is in, None if none."""
    # DuckDB's own function: the wire server's sessions have a compat macro of the same name
    ((first,),) = con.execute("SELECT system.main.txid_current()").fetchall()
    ((second,),) = con.execute("SELECT system.main.txid_current()").fetchall()
    return int(second) if first == second else None


def in_transaction(con: Any) -> bool:
    """Whether ``con`` (a DuckDB connection) is inside an explicit transaction."""
    return transaction_id(con) is not None


class StatementTransaction:
    """The transaction of one statement (see the module docstring); ``end`` exactly once."""

    def __init__(self, con: Any) -> None:
        self._con = con
        self.own = not in_transaction(con)
        if self.own:
            con.execute("BEGIN TRANSACTION")
        self._open = True
        self._on_end: list[Callable[[], None]] = []

    def on_end(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` when the statement ends (commit or failure)."""
        self._on_end.append(callback)

    def _ended(self) -> None:
        while self._on_end:
            self._on_end.pop()()

    @property
    def open(self) -> bool:
        return self._open

    def commit(self) -> None:
        """The statement succeeded (or its reader was discarded: it only read). A COMMIT
        DuckDB refuses fails the statement: its transaction is rolled back, then the error
        is raised."""
        if not self._open:
            return
        self._open = False
        self._ended()
        if self.own:
            try:
                self._con.execute("COMMIT")
            except duckdb.Error as err:
                _end_failed(self._con, own=True, err=err)
                raise

    def fail(self, err: BaseException) -> None:
        """The statement failed with ``err``: roll back its own transaction, or leave the
        user's aborted as DuckDB would."""
        if not self._open:
            return
        self._open = False
        self._ended()
        _end_failed(self._con, own=self.own, err=err)


def abort_user_transaction(con: Any, err: BaseException) -> None:
    """``execute()`` of a statement failed with ``err`` before or outside a statement
    transaction (binding, a template, a setting): abort the user's explicit transaction, as
    DuckDB aborts one in which ``execute()`` failed; nothing when none is open (autocommit)
    or DuckDB aborted it already."""
    for attempt in range(2):
        try:
            first = con.execute("SELECT system.main.txid_current()").fetchall()
            second = con.execute("SELECT system.main.txid_current()").fetchall()
        except duckdb.ResourceInUseException:
            if attempt == 0:
                _release_results(err)
                continue
            _UNSETTLED[con] = (False, f"statement failed: {err}")
            return
        except duckdb.Error:
            return  # aborted already (DuckDB refuses every statement of it)
        if first == second:
            _end_failed(con, own=False, err=err, message=f"statement failed: {err}")
        return


def settle(con: Any) -> None:
    """End the transaction a failed statement on ``con`` could not end (see the module
    docstring); a no-op for every other connection. Called before each statement runs."""
    if not _UNSETTLED:
        return
    pending = _UNSETTLED.pop(con, None)
    if pending is not None:
        own, message = pending
        _end_failed(con, own=own, err=None, message=message)


def _end_failed(con: Any, *, own: bool, err: BaseException | None, message: str = "") -> None:
    """Roll back a failed statement's own transaction, or abort the user's (DuckDB aborts a
    transaction in which a statement failed; so do we)."""
    message = message or f"semantic statement failed: {err}"
    for attempt in range(2):
        try:
            if own:
                con.execute("ROLLBACK")
            else:
                con.execute("SELECT error($1)", [message])
        except duckdb.ResourceInUseException:
            if attempt == 0 and err is not None:
                _release_results(err)
                continue
            log.warning(
                "a failed statement's transaction is ended before the connection's next "
                "statement: DuckDB still holds one of its results open"
            )
            _UNSETTLED[con] = (own, message)
        except duckdb.Error:
            pass  # ROLLBACK with nothing open, or error(): the user's transaction is aborted
        return


def _release_results(err: BaseException) -> None:
    """Free the DuckDB results the frames of ``err`` (and its causes) still hold: a reader
    opened by a call that then failed keeps the connection busy until it is collected."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [err]
    while todo:
        one = todo.pop()
        if one is None or id(one) in seen:
            continue
        seen.add(id(one))
        if one.__traceback__ is not None:
            traceback.clear_frames(one.__traceback__)
        todo += [one.__cause__, one.__context__]
    gc.collect()
