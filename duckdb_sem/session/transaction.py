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
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import duckdb

__all__ = ["StatementTransaction", "in_transaction", "transaction_id"]


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
        """The statement succeeded (or its reader was discarded: it only read)."""
        if not self._open:
            return
        self._open = False
        self._ended()
        if self.own:
            self._con.execute("COMMIT")

    def fail(self, err: BaseException) -> None:
        """The statement failed with ``err``: roll back its own transaction, or leave the
        user's aborted as DuckDB would."""
        if not self._open:
            return
        self._open = False
        self._ended()
        with contextlib.suppress(duckdb.Error):
            if self.own:
                self._con.execute("ROLLBACK")
            else:  # DuckDB aborts a transaction in which a statement failed; so do we
                self._con.execute("SELECT error($1)", [f"semantic statement failed: {err}"])
