"""The persistent LLM-call cache: signature -> completion, in one SQLite file.

Keys are request signatures (:meth:`LLMRequest.signature`), which hash everything that
determines the answer: backend and model, decoding parameters, output type, operator, prompt
prefix and rendered row. SQLite in WAL mode makes writes atomic and crash-safe (a killed
process leaves either the old or the new row, never a torn one) and lets several processes share
the file. A completion that failed to parse after the backend's retries (``error`` set) is
cached too: the same model at temperature 0 gives the same answer again, so a rerun would pay
for the same NULL; ``retry_failures=True`` ignores such entries (and overwrites them). Aborted
requests are never cached.

Faults (:mod:`.faults`): a damaged file (a corrupted page, a file that is not a database) raises
:class:`~duckdb_sem.errors.ConfigError` naming the file and the fix, never a raw
``sqlite3.DatabaseError``. A file that cannot be written (a full disk, a read-only file,
directory or mount) does not fail the query: the cache goes read-only (or off, when it cannot
be read either) with one logged warning, and answers are returned uncached. Each entry carries
a checksum of its signature and answer; an entry that does not match is a miss (asked again
and overwritten), counted in :meth:`LLMCache.stats`. Entries written before checksums existed
are misses once, then rewritten with one.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path

from duckdb_sem.cache.arrays import AnswerArrays
from duckdb_sem.cache.faults import (
    CacheMode,
    CacheStats,
    damaged_error,
    entry_checksum,
    is_unwritable,
    mode_warning,
)
from duckdb_sem.errors import ConfigError
from duckdb_sem.llm.request import Completion

__all__ = ["Connect", "LLMCache"]

log = logging.getLogger(__name__)

#: how the store opens SQLite (``sqlite3.connect``'s signature); a seam for fault tests
Connect = Callable[..., sqlite3.Connection]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS completions (
    signature TEXT PRIMARY KEY,
    completion TEXT NOT NULL,
    created REAL NOT NULL,
    checksum TEXT
)
"""


class LLMCache:
    """Thread-safe; one connection per cache object, serialized by a lock."""

    def __init__(
        self,
        path: Path | str,
        *,
        retry_failures: bool = False,
        connect: Connect = sqlite3.connect,
    ) -> None:
        self.retry_failures = retry_failures
        self.path = Path(path)
        self._connect = connect
        self._lock = threading.Lock()
        self._stats = CacheStats()
        self._checksums = True  # False: an old read-only file without the column
        #: whole answer arrays of repeated batches (in memory; see ``cache.arrays``)
        self.arrays = AnswerArrays()
        self._db: sqlite3.Connection | None = None
        try:
            self._db = self._open_read_write()
        except (OSError, sqlite3.Error) as err:
            if not is_unwritable(err):
                if isinstance(err, sqlite3.DatabaseError):
                    raise damaged_error(self.path, err) from None
                raise ConfigError(
                    f"cannot open the LLM cache at {self.path}: {err}; set DUCKDB_SEM_CACHE to a "
                    "writable file, or to 'off' to disable caching"
                ) from None
            self._db = self._open_read_only(err)

    @property
    def mode(self) -> CacheMode:
        return self._stats.mode

    def stats(self) -> CacheStats:
        """Its mode, and the damaged entries, old entries and refused writes it met."""
        with self._lock:
            return self._stats

    def get_many(self, signatures: Iterable[str]) -> dict[str, Completion]:
        keys = list(dict.fromkeys(signatures))
        found: dict[str, Completion] = {}
        damaged = unchecked = 0
        with self._lock:
            if self._db is None:
                return found
            column = "checksum" if self._checksums else "NULL"
            try:
                rows = []
                for start in range(0, len(keys), 500):
                    chunk = keys[start : start + 500]
                    marks = ",".join("?" * len(chunk))
                    rows += self._db.execute(
                        f"SELECT signature, completion, {column} FROM completions "
                        f"WHERE signature IN ({marks})",
                        chunk,
                    ).fetchall()
            except sqlite3.Error as err:
                if not is_unwritable(err):
                    raise damaged_error(self.path, err) from None
                self._degrade(CacheMode.OFF, err)
                return found
            for signature, data, checksum in rows:
                if checksum is None:
                    unchecked += 1  # written before checksums: asked again, then rewritten
                    continue
                if checksum != entry_checksum(signature, data):
                    damaged += 1
                    continue
                try:
                    completion = Completion.from_json(data)
                except (ValueError, KeyError, TypeError):
                    damaged += 1
                    continue
                if completion.error is None or not self.retry_failures:
                    found[signature] = completion
            if damaged or unchecked:
                self._stats = replace(
                    self._stats,
                    damaged=self._stats.damaged + damaged,
                    unchecked=self._stats.unchecked + unchecked,
                )
        if damaged:
            log.warning(
                "the LLM cache %s has %d damaged entr%s (checksum mismatch): asking again and "
                "overwriting them; if this repeats, check the disk or delete the file",
                self.path, damaged, "y" if damaged == 1 else "ies",
            )  # fmt: skip
        return found

    def put_many(self, items: Mapping[str, Completion]) -> None:
        now = time.time()
        rows = []
        for sig, completion in items.items():
            if (completion.error or "").startswith("aborted"):
                continue
            data = completion.to_json()
            rows.append((sig, data, now, entry_checksum(sig, data)))
        if not rows:
            return
        with self._lock:
            if self._db is None or self.mode is not CacheMode.READ_WRITE:
                return
            try:
                self._db.executemany(
                    "INSERT OR REPLACE INTO completions (signature, completion, created, checksum)"
                    " VALUES (?, ?, ?, ?)",
                    rows,
                )
                self._db.commit()
            except (OSError, sqlite3.Error) as err:
                self._refused(err)

    def __len__(self) -> int:
        with self._lock:
            if self._db is None:
                return 0
            try:
                (count,) = self._db.execute("SELECT count(*) FROM completions").fetchone()
            except sqlite3.Error as err:
                if not is_unwritable(err):
                    raise damaged_error(self.path, err) from None
                self._degrade(CacheMode.OFF, err)
                return 0
        return int(count)

    def clear(self) -> None:
        with self._lock:
            if self._db is not None and self.mode is CacheMode.READ_WRITE:
                try:
                    self._db.execute("DELETE FROM completions")
                    self._db.commit()
                except (OSError, sqlite3.Error) as err:
                    self._refused(err)
        self.arrays.clear()

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()

    # -- internals ------------------------------------------------------------------------
    def _sqlite(self, target: str, *, uri: bool = False) -> sqlite3.Connection:
        return self._connect(target, uri=uri, check_same_thread=False, timeout=30.0)

    def _open_read_write(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = self._sqlite(str(self.path))
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute(_SCHEMA)
            if "checksum" not in _columns(db):
                try:
                    db.execute("ALTER TABLE completions ADD COLUMN checksum TEXT")
                except sqlite3.OperationalError:
                    if "checksum" not in _columns(db):  # not another process adding it
                        raise
            db.commit()
        except BaseException:
            db.close()
            raise
        return db

    def _open_read_only(self, cause: BaseException) -> sqlite3.Connection | None:
        """The file opened read-only, or None (no file, or not readable either); either way
        one warning. ``immutable=1`` is the last try: a WAL file in a read-only directory
        cannot be read otherwise (SQLite cannot create its ``-shm``), and where nobody can
        write nothing changes under it."""
        if not self.path.is_file():
            self._degrade(CacheMode.OFF, cause)
            return None
        for option in ("mode=ro", "immutable=1"):
            try:
                db = self._sqlite(f"{self.path.resolve().as_uri()}?{option}", uri=True)
            except sqlite3.Error:
                continue
            try:
                columns = _columns(db)
                if not columns:  # an empty file: nothing to read
                    break
                db.execute("SELECT count(*) FROM completions").fetchone()
            except sqlite3.Error as err:
                db.close()
                if not is_unwritable(err):
                    raise damaged_error(self.path, err) from None
                continue
            self._checksums = "checksum" in columns
            self._degrade(CacheMode.READ_ONLY, cause)
            return db
        self._degrade(CacheMode.OFF, cause)
        return None

    def _refused(self, err: BaseException) -> None:
        """A write failed: read-only from now on if the disk refused it, else an error."""
        with contextlib.suppress(sqlite3.Error):
            self._db.rollback()  # type: ignore[union-attr]
        if not is_unwritable(err):
            if isinstance(err, sqlite3.DatabaseError):
                raise damaged_error(self.path, err) from None
            raise err
        self._stats = replace(self._stats, write_failures=self._stats.write_failures + 1)
        self._degrade(CacheMode.READ_ONLY, err)

    def _degrade(self, mode: CacheMode, err: BaseException) -> None:
        """Go down to ``mode`` (never back up), warning once per step."""
        order = list(CacheMode)
        if order.index(mode) <= order.index(self._stats.mode):
            return
        if mode is CacheMode.OFF and self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
            self._db = None
        self._stats = replace(self._stats, mode=mode)
        log.warning("%s", mode_warning(self.path, err, mode))


def _columns(db: sqlite3.Connection) -> set[str]:
    return {row[1] for row in db.execute("PRAGMA table_info(completions)")}
