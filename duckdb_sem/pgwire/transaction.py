"""A session's transaction as PostgreSQL 15 runs it, on DuckDB, which has no savepoints.

DuckDB transactions are flat, so savepoints are kept here: the transaction logs each statement
that wrote (SQL, parameters, the tag it was acknowledged with), a savepoint remembers the log's
length, and ``ROLLBACK TO`` rolls DuckDB back, begins again and replays the log up to that
savepoint. The outcome is PostgreSQL's (work after the savepoint undone, work before it kept, a
failed transaction usable again) only if the replay writes exactly what was acknowledged, so a
replay is refused rather than run at a snapshot other than the first:

- **nothing to undo**: ``ROLLBACK TO`` a savepoint after which nothing was written and nothing
  failed changes nothing, and nothing is re-run;
- **volatile writes** (``nextval``, ``random()``, ``now()``, ``gen_random_uuid()``, files and
  PostgreSQL sources read again, semantic calls with the LLM cache off) would give other rows
  the second time: ``ROLLBACK TO`` fails with 0A000 and the transaction is aborted;
- **another session committed** since the transaction began (the server's
  :class:`~duckdb_sem.pgwire.commit_clock.CommitClock`): the replay would read its rows, so
  ``ROLLBACK TO`` fails with 40001 (retry the transaction), before or after the replay;
- a replayed write whose tag differs from the acknowledged one (another row count) fails it
  too (40001).

A failed ``ROLLBACK TO`` leaves the transaction aborted (``E``): every statement is refused until
``ROLLBACK``, and ``COMMIT`` answers ``ROLLBACK``, as PostgreSQL does for a failed transaction;
nothing acknowledged is committed other than as acknowledged.

Example (psycopg's nested ``transaction()``)::

    BEGIN; INSERT 1; SAVEPOINT s; INSERT 2; ROLLBACK TO SAVEPOINT s; COMMIT   -> [1]
    BEGIN; INSERT 1; SAVEPOINT s; <error>; ROLLBACK TO SAVEPOINT s; INSERT 3; COMMIT -> [1, 3]
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from duckdb_sem.errors import TransactionStateError
from duckdb_sem.pgwire.commit_clock import ClockMark
from duckdb_sem.pgwire.lexer import mask_strings, strip_comments

__all__ = ["Transaction", "Write", "replay_hazard"]

#: functions whose value differs when a statement runs again (DuckDB's spellings too)
_VOLATILE = re.compile(
    r"\b(nextval|setval|currval|random|setseed|gen_random_uuid|uuid|uuidv4|uuidv7|now|"
    r"current_timestamp|current_date|current_time|localtime|localtimestamp|today|"
    r"get_current_time|get_current_timestamp|transaction_timestamp|statement_timestamp|"
    r"clock_timestamp|timeofday)\b",
    re.IGNORECASE,
)
#: table functions that read outside the database (a file may change between runs)
_EXTERNAL = re.compile(
    r"\b(read_\w+|glob|parquet_scan|csv_scan|postgres_scan\w*|postgres_query|sqlite_scan)\s*\(",
    re.IGNORECASE,
)
_SEMANTIC = re.compile(r"\b(sem_\w+|ai_\w+|llm_\w+)\s*\(", re.IGNORECASE)
#: sequence functions: a statement that calls one changes the database even when it only reads
SEQUENCE_CALL = re.compile(r"\b(nextval|setval)\s*\(", re.IGNORECASE)


def replay_hazard(sql: str, *, sources: Iterable[str] = (), cache: bool = True) -> str | None:
    """Why running ``sql`` again could write other rows (None: it writes the same rows when the
    database is as it was): a volatile function, a file or a PostgreSQL source (catalog names
    ``sources``) read again, or a semantic call while the LLM cache is off (``cache``)."""
    masked, _ = mask_strings(strip_comments(sql))
    if match := _VOLATILE.search(masked):
        return f"it calls {match[1]}(), which gives another value each time"
    if match := _EXTERNAL.search(masked):
        return f"it reads {match[1]}(), outside the database, which may have changed"
    for alias in sources:
        if re.search(rf'(?<![\w."]){re.escape(alias)}\s*\.', masked, re.IGNORECASE):
            return f"it reads the PostgreSQL source {alias}, which may have changed"
    if not cache and (match := _SEMANTIC.search(masked)):
        return f"it calls {match[1]}() with the LLM cache off, whose answers may differ"
    return None


@dataclass(frozen=True, slots=True)
class Write:
    """One logged write: what ran, and what the client was told (``tag``: None when the rows
    were streamed, RETURNING)."""

    sql: str
    params: list[Any]
    tag: str | None = None
    hazard: str | None = None  # why a replay could write other rows (see replay_hazard)


@dataclass
class Transaction:
    """``status`` is the ReadyForQuery byte: ``I`` idle, ``T`` in a block, ``E`` failed."""

    status: bytes = b"I"
    log: list[Write] = field(default_factory=list)
    savepoints: list[tuple[str, int]] = field(default_factory=list)
    #: the server's commit counts when the block began (None: outside a block)
    began: ClockMark | None = None
    #: something was written in the block (its COMMIT is a commit others can see)
    dirty: bool = False
    #: settings changed in the block: their values before it (ROLLBACK restores them; None:
    #: not set then, so RESET), and those a ``SET LOCAL`` changed (COMMIT restores them too)
    settings_before: dict[str, str | None] = field(default_factory=dict)
    local_before: dict[str, str | None] = field(default_factory=dict)

    def begin(self, mark: ClockMark | None = None) -> None:
        self.status = b"T"
        self.log.clear()
        self.savepoints.clear()
        self.began, self.dirty = mark, False
        self.settings_before.clear()
        self.local_before.clear()

    def end(self, *, committed: bool) -> dict[str, str | None]:
        """The block ends; the settings to restore, as PostgreSQL restores them: a ROLLBACK
        undoes every SET in the block, a COMMIT only the ``SET LOCAL`` ones."""
        restore = dict(self.local_before if committed else self.settings_before)
        self.status = b"I"
        self.log.clear()
        self.savepoints.clear()
        self.began, self.dirty = None, False
        self.settings_before.clear()
        self.local_before.clear()
        return restore

    def setting_changed(self, name: str, before: str | None, *, local: bool) -> None:
        """``SET [LOCAL] name`` in the block; ``before``: its value until then."""
        if self.status == b"I":
            return
        self.settings_before.setdefault(name, before)
        if local:
            self.local_before.setdefault(name, before)
        else:  # a plain SET after a SET LOCAL stays after COMMIT
            self.local_before.pop(name, None)

    def failed(self) -> None:
        if self.status == b"T":
            self.status = b"E"

    def wrote(self, write: Write) -> None:
        if self.status == b"T":
            self.log.append(write)
            self.dirty = True

    def savepoint(self, name: str) -> None:
        self._require_block("SAVEPOINT")
        self.savepoints.append((name, len(self.log)))

    def release(self, name: str) -> None:
        self._require_block("RELEASE SAVEPOINT")
        index = self._find(name)
        del self.savepoints[index:]

    def rollback_to(
        self,
        name: str,
        restart: Callable[[], None],
        run: Callable[[Write], str | None],
        unchanged: Callable[[ClockMark | None], bool],
    ) -> None:
        """Undo the work after savepoint ``name``: ``restart`` DuckDB's transaction and ``run``
        (replay) the writes before it, each returning its tag; ``unchanged(began)``: no other
        session committed since the block began. Raises 0A000 or 40001 (see the module
        docstring) where the replay could not write what was acknowledged."""
        self._require_block("ROLLBACK TO SAVEPOINT")
        index = self._find(name)
        length = self.savepoints[index][1]
        del self.savepoints[index + 1 :]
        if self.status == b"T" and len(self.log) == length:
            return  # nothing written since, nothing failed: nothing to undo
        kept = self.log[:length]
        for write in kept:
            if write.hazard is not None:
                raise _cannot(name, f"{_short(write.sql)} cannot be re-run exactly: {write.hazard}")
        if not unchanged(self.began):
            raise _conflict(name)
        restart()
        self.log = []
        self.status = b"T"
        for write in kept:
            tag = run(write)
            if write.tag is not None and tag != write.tag:
                raise _conflict(
                    name, f"re-run, {_short(write.sql)} answered {tag}, not {write.tag}"
                )
            self.log.append(write)
        if not unchanged(self.began):  # a commit raced the replay: it may have read its rows
            raise _conflict(name)

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


_HOW = (
    "DuckDB has no savepoints, so the server undoes to one by re-running the transaction's "
    "writes before it, and does so only when they write exactly what was acknowledged"
)


def _short(sql: str) -> str:
    text = " ".join(sql.split())
    return repr(text if len(text) <= 60 else text[:57] + "...")


def _cannot(name: str, why: str) -> TransactionStateError:
    return TransactionStateError(
        f'cannot roll back to savepoint "{name}": {why}. {_HOW}. The transaction is aborted: '
        "ROLLBACK and run it again, without the savepoint or with the volatile part after it",
        sqlstate="0A000",
    )


def _conflict(name: str, why: str = "") -> TransactionStateError:
    why = why or "another session committed a change since this transaction began"
    return TransactionStateError(
        f'could not serialize access: cannot roll back to savepoint "{name}": {why}, so its '
        f"writes before the savepoint cannot be re-run at the snapshot they first saw. {_HOW}. "
        "The transaction is aborted: ROLLBACK and retry it",
        sqlstate="40001",
    )
