"""Turns on the CPU for embedded models: one evaluation at a time on this machine, per user.

Each process that runs an embedded model (llama.cpp, the MiniLM embedder) loads it with a
thread for every core. Two such processes at once do not share the cores, they fight for them:
measured here, two Python processes running the same 35-row rating took 128-131 s each where
one alone takes 14.6 s, 4.5x slower than running them one after the other. Evaluating in turns
gives each process the whole machine for one row and costs nothing when a process is alone.

:func:`cpu_turn` is the turn: a reentrant lock within the process and an advisory ``flock`` on
a per-user file across processes (``$TMPDIR/duckdb-sem-<uid>/cpu.lock``). A turn covers one
row's evaluation (a decision, a classification, one generated answer, one embedding batch), so
a waiting process gets the machine within one row, cancellation between rows still works, and
each process keeps its own KV cache warm (its context is its own; answers never depend on the
other process). The kernel drops a dead process's lock, so a process that dies leaves nothing
stuck; a *stopped* one (Ctrl-Z) holds its turn until it is resumed.

Fairness: ``flock`` hands a released lock to whoever asks first, and a process that releases
and asks again at once would win every time. A waiting process therefore holds a shared lock on
a second file (``cpu.wait``) while it waits; a process ending its turn that finds a waiter
steps aside until the waiter holds the turn (at most 20 ms) before asking again.

Weights are memory-mapped by llama.cpp, so processes on one machine share their pages; what
each process adds is its own KV cache and buffers (``benchmarks/bench_processes.py`` measures
both). Turns are off for a backend given ``share_cpu=off`` (``llama:?share_cpu=off``), e.g. for
processes pinned to disjoint cores with ``threads=1``.

Example:
    >>> with cpu_turn():
    ...     pass  # evaluate one row
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import logging
import os
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

__all__ = ["cpu_turn", "lock_dir", "turn_count"]

log = logging.getLogger(__name__)

#: how long at most a process that ends its turn with a waiter steps aside, and how often it
#: looks whether the waiter has taken the turn (seconds)
_STEP_ASIDE_S = 0.02
_POLL_S = 0.0005

_local = threading.RLock()  # one thread of this process at a time
_depth = 0  # nesting of turns held by the thread holding _local
_files: dict[str, IO[bytes]] = {}  # "lock", "wait" -> open file (opened once per process)
_turns = 0  # turns taken by this process (for tests and stats)
_pid = os.getpid()


def lock_dir() -> Path:
    """The per-user folder of the lock files (created private to the user)."""
    folder = Path(tempfile.gettempdir()) / f"duckdb-sem-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder


def turn_count() -> int:
    """Turns this process has taken on the machine lock so far."""
    return _turns


@atexit.register
def _close_files() -> None:
    for handle in _files.values():
        handle.close()
    _files.clear()


def _file(name: str) -> IO[bytes] | None:
    global _pid
    if os.getpid() != _pid:  # a forked child: its copies of the files hold the parent's
        # locks, so it opens its own
        _close_files()
        _pid = os.getpid()
    if name not in _files:
        try:
            _files[name] = open(lock_dir() / f"cpu.{name}", "ab")  # noqa: SIM115 - held open
        except OSError as err:
            log.warning("no CPU turns across processes (%s): evaluating without them", err)
            return None
    return _files[name]


@contextlib.contextmanager
def cpu_turn(shared: bool = True) -> Iterator[None]:
    """Hold the machine's CPU turn (``shared=False``: only this process's lock)."""
    global _depth, _turns
    with _local:
        outermost = _depth == 0 and shared
        lock = _file("lock") if outermost else None
        if lock is not None:
            _acquire(lock)
            _turns += 1
        _depth += 1
        try:
            yield
        finally:
            _depth -= 1
            if lock is not None:
                fcntl.flock(lock, fcntl.LOCK_UN)
                _step_aside_for_a_waiter()


def _acquire(lock: IO[bytes]) -> None:
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return
    except BlockingIOError:
        pass
    wait = _file("wait")
    if wait is not None:
        fcntl.flock(wait, fcntl.LOCK_SH)  # "someone is waiting", for the holder to see
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
    finally:
        if wait is not None:
            fcntl.flock(wait, fcntl.LOCK_UN)


def _step_aside_for_a_waiter() -> None:
    """While another process waits for the turn (holds ``cpu.wait``), give it time to take
    it: a waiter lets go of ``cpu.wait`` once it holds the turn. At most :data:`_STEP_ASIDE_S`."""
    wait = _file("wait")
    if wait is None:
        return
    deadline = time.monotonic() + _STEP_ASIDE_S
    while True:
        try:
            fcntl.flock(wait, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # a process waits for the turn
            if time.monotonic() >= deadline:
                return
            time.sleep(_POLL_S)
            continue
        fcntl.flock(wait, fcntl.LOCK_UN)
        return
