"""What a failing cache file means: damage to report, or a disk that only stops the caching.

The cache only saves work: every answer in it can be asked again. So a cache that cannot be
*written* (a full disk, a read-only file, directory or mount, a permission) must not fail the
query: the cache carries on read-through only (or off, when it cannot even be read) and says so
once, with the fix. Only *damage* (a corrupted page, a file that is not a database) is an error,
since deleting the file is the user's call. Each entry also carries a checksum of its signature
and answer (:func:`entry_checksum`); an entry whose checksum does not match is a miss, asked
again and overwritten, never returned.

Example:
    >>> entry_checksum("sig", '{"value": true}') == entry_checksum("sig", '{"value": true}')
    True
    >>> entry_checksum("sig", '{"value": true}') == entry_checksum("sig", '{"value": fals}')
    False
"""

from __future__ import annotations

import errno
import hashlib
import sqlite3
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from duckdb_sem.errors import ConfigError

__all__ = [
    "CacheMode",
    "CacheStats",
    "damaged_error",
    "entry_checksum",
    "is_unwritable",
    "mode_warning",
]

#: errors of a disk or file that cannot take writes: full, read-only, not ours
_UNWRITABLE_ERRNO = frozenset(
    {errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EPERM, errno.EDQUOT, errno.EIO}
)
#: SQLite's primary result codes for the same (the low byte of an extended code): full, read
#: only, cannot open, no permission, an I/O error, locked past the busy timeout
_UNWRITABLE_SQLITE = frozenset(
    {
        sqlite3.SQLITE_FULL,
        sqlite3.SQLITE_READONLY,
        sqlite3.SQLITE_CANTOPEN,
        sqlite3.SQLITE_PERM,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_LOCKED,
    }
)
#: the messages of those, for errors raised without a code
_UNWRITABLE_TEXT = (
    "disk is full",
    "readonly database",
    "read-only",
    "unable to open database file",
    "disk i/o error",
    "database is locked",
)


class CacheMode(Enum):
    """How much of a cache still works."""

    READ_WRITE = "read-write"
    READ_ONLY = "read-only"  # answers found are used, new ones are not kept
    OFF = "off"  # neither: every request goes to the backend


def entry_checksum(signature: str, completion: str) -> str:
    """The checksum stored beside an entry: its signature and its answer's JSON, so an edited
    answer, or one moved to another signature, does not match."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(signature.encode("utf-8", "surrogatepass"))
    digest.update(b"\0")
    digest.update(completion.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def is_unwritable(err: BaseException) -> bool:
    """True when ``err`` says the disk or file refuses writes (not that the file is damaged)."""
    if isinstance(err, sqlite3.Error):
        code = getattr(err, "sqlite_errorcode", None)
        if isinstance(code, int) and code & 0xFF in _UNWRITABLE_SQLITE:
            return True
        return any(text in str(err).lower() for text in _UNWRITABLE_TEXT)
    return isinstance(err, OSError) and err.errno in _UNWRITABLE_ERRNO


def damaged_error(path: Path, err: BaseException) -> ConfigError:
    """The error of a damaged file (a corrupted page, not a database), naming it and the fix."""
    return ConfigError(
        f"the LLM cache {path} is damaged or not a cache file ({err}); delete it (it only holds "
        "answers that can be asked again), point DUCKDB_SEM_CACHE at another file, or set it "
        "to 'off'"
    )


def mode_warning(path: Path, err: BaseException, mode: CacheMode) -> str:
    """The one warning of a cache going to ``mode``: what failed, what happens, the fix."""
    what = (
        "answers found in it are still used, new ones are not kept"
        if mode is CacheMode.READ_ONLY
        else "queries run without it"
    )
    return (
        f"the LLM cache {path} cannot be written ({type(err).__name__}: {err}); it is now "
        f"{mode.value}: {what}. Queries still return their answers. To cache again, free space "
        "on its disk or make it writable, point DUCKDB_SEM_CACHE (--cache) at a writable file, "
        "or set it to 'off' to run without a cache and without this warning"
    )


@dataclass(frozen=True, slots=True)
class CacheStats:
    """What a cache object met since it was opened (``LLMCache.stats()``)."""

    mode: CacheMode = CacheMode.READ_WRITE
    damaged: int = 0  # entries whose checksum did not match: misses, asked again
    unchecked: int = 0  # entries of an older version, without a checksum: misses once
    write_failures: int = 0  # writes the disk refused (the answers were returned uncached)
