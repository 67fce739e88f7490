"""How long a sidecar has been idle: requests in flight and when the last one ended.

``duckdb-sem serve --idle-exit SECONDS`` exits after that long with no request in flight and
none begun (the local scheduler, ``DUCKDB_SEM_SCHEDULER=local``, starts it so). A connection
kept open without requests is idle: a client process that holds one but runs no query lets the
model go, and its next query starts a new sidecar.

Example:
    >>> activity = Activity()
    >>> with activity.request():
    ...     activity.idle_for()
    0.0
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

__all__ = ["Activity"]


class Activity:
    """Thread-safe count of requests in flight, with the time the last one ended."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._busy = 0
        self._last = clock()

    @contextlib.contextmanager
    def request(self) -> Iterator[None]:
        """One request, from its first byte handled to its answer sent."""
        self.begin()
        try:
            yield
        finally:
            self.end()

    def begin(self) -> None:
        """A request began (each ``begin`` is followed by one ``end``)."""
        with self._lock:
            self._busy += 1

    def end(self) -> None:
        """A request ended: answered, failed, or its client left."""
        with self._lock:
            self._busy -= 1
            self._last = self._clock()

    def idle_for(self) -> float:
        """Seconds since the last request ended (0 while one is in flight)."""
        with self._lock:
            return 0.0 if self._busy else max(0.0, self._clock() - self._last)

    def wait_idle(self, seconds: float, stop: threading.Event) -> bool:
        """Block until idle for ``seconds`` (True) or until ``stop`` is set (False)."""
        while not stop.is_set():
            left = seconds - self.idle_for()
            if left <= 0:
                return True
            stop.wait(min(max(left, 0.05), 1.0))
        return False
