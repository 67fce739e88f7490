"""Notice a client that went away while its statement runs, and cancel that statement.

A session thread is inside DuckDB while a statement runs and reads nothing from its socket,
so a killed client would go unnoticed until the result is written, long after its LLM work is
done. Like PostgreSQL's ``client_connection_check_interval`` (which polls for ``POLLRDHUP``),
one thread waits with ``epoll`` for the peer to close (``EPOLLRDHUP``/``EPOLLHUP``) on the
sockets of running statements only, and calls the session's cancel: its queued SEUs are
dropped and DuckDB is interrupted, so the statement stops within the SEU in flight. Bytes a
client pipelines meanwhile do not wake it (no ``EPOLLIN``). Where ``epoll`` is missing (not
Linux), nothing is watched.
"""

from __future__ import annotations

import contextlib
import logging
import select
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["HangupWatcher"]

log = logging.getLogger(__name__)


class HangupWatcher:
    def __init__(self) -> None:
        self._epoll = select.epoll() if hasattr(select, "epoll") else None
        self._callbacks: dict[int, Callable[[], None]] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False

    @contextmanager
    def watching(self, fd: int, on_hangup: Callable[[], None]) -> Iterator[None]:
        """While the block runs, call ``on_hangup`` (once) if the peer of ``fd`` closes."""
        if self._epoll is None or fd < 0:
            yield
            return
        mask = select.EPOLLRDHUP | select.EPOLLHUP | select.EPOLLERR
        with self._lock:
            nested = fd in self._callbacks
            if not nested:
                self._callbacks[fd] = on_hangup
                self._epoll.register(fd, mask)
            self._start()
        try:
            yield
        finally:
            if not nested:
                with self._lock:
                    if self._callbacks.pop(fd, None) is not None:
                        with contextlib.suppress(OSError):
                            self._epoll.unregister(fd)

    def close(self) -> None:
        self._closed = True
        if self._epoll is not None:
            self._epoll.close()

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="pgwire-hangup", daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        assert self._epoll is not None
        while not self._closed:
            try:
                events = self._epoll.poll(1.0)
            except (OSError, ValueError):  # closed
                return
            for fd, _ in events:
                with self._lock:
                    callback = self._callbacks.pop(fd, None)
                    with contextlib.suppress(OSError):
                        self._epoll.unregister(fd)
                if callback is not None:
                    log.info("client went away during a statement: cancelling it")
                    callback()
