"""The persistent LLM-call cache: signature -> completion, in one SQLite file.

Keys are request signatures (:meth:`LLMRequest.signature`), which hash everything that
determines the answer: backend and model, decoding parameters, output type, operator, prompt
prefix and rendered row. SQLite in WAL mode makes writes atomic and crash-safe (a killed
process leaves either the old or the new row, never a torn one) and lets several processes share
the file. A completion that failed to parse after the backend's retries (``error`` set) is
cached too: the same model at temperature 0 gives the same answer again, so a rerun would pay
for the same NULL; ``retry_failures=True`` ignores such entries (and overwrites them). Aborted
requests are never cached.

A damaged file (a corrupted page, a file that is not a database) raises
:class:`~duckdb_sem.errors.ConfigError` naming the file and the fix, never a raw
``sqlite3.DatabaseError``.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from duckdb_sem.cache.arrays import AnswerArrays
from duckdb_sem.errors import ConfigError
from duckdb_sem.llm.request import Completion

__all__ = ["LLMCache"]

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS completions (
    signature TEXT PRIMARY KEY,
    completion TEXT NOT NULL,
    created REAL NOT NULL
)
"""


def _damaged(path: Path, err: sqlite3.Error) -> ConfigError:
    return ConfigError(
        f"the LLM cache {path} is damaged or not a cache file ({err}); delete it (it only holds "
        "answers that can be asked again), point DUCKDB_SEM_CACHE at another file, or set it "
        "to 'off'"
    )


class LLMCache:
    """Thread-safe; one connection per cache object, serialized by a lock."""

    def __init__(self, path: Path | str, *, retry_failures: bool = False) -> None:
        self.retry_failures = retry_failures
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30.0)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(_SCHEMA)
            self._db.commit()
        except (OSError, sqlite3.Error) as err:
            if isinstance(err, sqlite3.DatabaseError):
                raise _damaged(self.path, err) from None
            raise ConfigError(
                f"cannot open the LLM cache at {self.path}: {err}; set DUCKDB_SEM_CACHE to a "
                "writable file, or to 'off' to disable caching"
            ) from None
        self._lock = threading.Lock()
        #: whole answer arrays of repeated batches (in memory; see ``cache.arrays``)
        self.arrays = AnswerArrays()

    @contextmanager
    def _locked(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                yield self._db
            except sqlite3.DatabaseError as err:
                raise _damaged(self.path, err) from None

    def get_many(self, signatures: Iterable[str]) -> dict[str, Completion]:
        keys = list(dict.fromkeys(signatures))
        found: dict[str, Completion] = {}
        with self._locked() as db:
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = db.execute(
                    f"SELECT signature, completion FROM completions WHERE signature IN ({marks})",
                    chunk,
                ).fetchall()
                for signature, data in rows:
                    try:
                        completion = Completion.from_json(data)
                    except (ValueError, KeyError):
                        log.warning("ignoring unreadable cache entry %s", signature[:12])
                        continue
                    if completion.error is None or not self.retry_failures:
                        found[signature] = completion
        return found

    def put_many(self, items: Mapping[str, Completion]) -> None:
        now = time.time()
        rows = [
            (sig, c.to_json(), now)
            for sig, c in items.items()
            if not (c.error or "").startswith("aborted")
        ]
        if not rows:
            return
        with self._locked() as db:
            db.executemany(
                "INSERT OR REPLACE INTO completions (signature, completion, created) VALUES (?, ?, ?)",
                rows,
            )
            db.commit()

    def __len__(self) -> int:
        with self._locked() as db:
            (count,) = db.execute("SELECT count(*) FROM completions").fetchone()
        return int(count)

    def clear(self) -> None:
        with self._locked() as db:
            db.execute("DELETE FROM completions")
            db.commit()
        self.arrays.clear()

    def close(self) -> None:
        with self._lock:
            self._db.close()
