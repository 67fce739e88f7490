"""Where the local scheduler of a backend lives: its socket, start lock and log, per user.

``DUCKDB_SEM_SCHEDULER=local`` shares one sidecar among the processes of a user that schedule
the same work: the same backend spec, result cache file and ``retry_failures`` choice (a
client asking ``cache='off'`` must not be answered from a cache, nor another file's client
fill this one). Their hash names the files in the user's private folder,
``$TMPDIR/duckdb-sem-<uid>/`` (the folder of the CPU turns' locks; mode 0700, and refused when
another user owns it or its mode is wider: :mod:`.safe_paths`)::

    sched-<key>.sock   the sidecar's unix socket
    sched-<key>.lock   flock held while a process starts the sidecar, or one retires it
    sched-<key>.log    the sidecar's stderr (read it when a start fails)

Example:
    >>> paths = local_paths("test:", None, retry_failures=False, folder=Path("/tmp/x"))
    >>> paths.socket.name.startswith("sched-"), paths.socket.suffix
    (True, '.sock')
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from duckdb_sem.backends.cpu_turns import lock_dir
from duckdb_sem.errors import ConfigError
from duckdb_sem.scheduler.safe_paths import open_own_file

__all__ = ["LocalPaths", "local_paths", "lock_path_of", "start_lock"]

#: a unix socket's path must fit ``sockaddr_un.sun_path`` (108 bytes with its NUL on Linux)
_MAX_SOCKET_PATH = 107


@dataclass(frozen=True, slots=True)
class LocalPaths:
    key: str
    socket: Path
    lock: Path
    log: Path


def local_paths(
    spec: str, cache_path: Path | None, *, retry_failures: bool, folder: Path | None = None
) -> LocalPaths:
    """The files of the local scheduler for this backend spec and cache choice."""
    cache = str(cache_path.expanduser().resolve()) if cache_path is not None else "off"
    text = json.dumps([spec, cache, retry_failures])
    key = hashlib.sha256(text.encode()).hexdigest()[:16]
    where = folder if folder is not None else lock_dir()
    paths = LocalPaths(
        key=key,
        socket=where / f"sched-{key}.sock",
        lock=where / f"sched-{key}.lock",
        log=where / f"sched-{key}.log",
    )
    if len(str(paths.socket).encode()) > _MAX_SOCKET_PATH:
        raise ConfigError(
            f"the local scheduler's socket path {paths.socket} is longer than a unix socket "
            f"allows ({_MAX_SOCKET_PATH} bytes); set TMPDIR to a shorter folder (e.g. /tmp)"
        )
    return paths


def lock_path_of(socket_path: Path) -> Path:
    """The start lock that goes with a local scheduler's socket."""
    return socket_path.with_suffix(".lock")


@contextlib.contextmanager
def start_lock(path: Path, *, wait: bool = True) -> Iterator[bool]:
    """Hold the exclusive start lock at ``path``; yields False (not held) when ``wait`` is
    False and another process holds it. The kernel drops the lock of a process that dies.
    The file is opened without following a symlink (UnsafePathError)."""
    with os.fdopen(open_own_file(path), "ab") as handle:
        flags = fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB
        try:
            fcntl.flock(handle, flags)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
