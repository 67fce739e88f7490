"""Notice a sidecar client that hangs up while its SEU waits, and cancel the SEU's query.

A sidecar handler thread blocks on an SEU's future until the scheduler answers it; without a
watch, a client process that died (or closed its connection) would leave its queries queued
and running until they finished for nobody. :class:`HangupWatch` keeps one ``epoll`` over the
open connections, each registered once for its life (:meth:`~HangupWatch.add`,
:meth:`~HangupWatch.discard`) for the peer's hang-up only (``EPOLLRDHUP``, ``EPOLLHUP``,
``EPOLLERR``), not for data: a request arriving is the handler's to read. A hang-up during an
SEU's wait (:meth:`~HangupWatch.watching`) calls ``on_hangup(query_id)`` (the scheduler's
``cancel``) and marks the wait, so the handler drops the connection instead of answering it;
one that came before the wait began is acted on when it begins. Registering once per
connection, not once per SEU, keeps two ``epoll_ctl`` calls (each a GIL release and
re-acquire under load) off every SEU (benchmarks/bench_sidecar_load.py).

Example:
    >>> watch = HangupWatch(print)
    >>> # watch.add(connection)  (when the connection is accepted)
    >>> # with watch.watching(connection, seu.query_id) as peer:
    >>> #     future.exception()  (waits)
    >>> # if peer.gone: ... the client left; do not answer
    >>> # watch.discard(connection)  (when it is closed)
    >>> watch.close()
"""

from __future__ import annotations

import contextlib
import logging
import select
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

__all__ = ["HangupWatch", "Peer"]

log = logging.getLogger(__name__)

_GONE = select.EPOLLHUP | select.EPOLLRDHUP | select.EPOLLERR
#: how long the watch thread sleeps in one poll (it also stops within this after close)
_POLL_S = 0.5


@dataclass(eq=False)
class Peer:
    """One open connection: ``query_id`` while an SEU of it waits; ``gone`` turns true when
    the client hung up during that wait; ``closed`` once it hung up at all."""

    sock: socket.socket
    query_id: str | None = None
    gone: bool = False
    closed: bool = False


class HangupWatch:
    """One thread and one ``epoll`` for every open connection (thread-safe)."""

    def __init__(self, on_hangup: Callable[[str], None]) -> None:
        self._on_hangup = on_hangup
        self._epoll = select.epoll()
        self._lock = threading.Lock()
        self._peers: dict[int, Peer] = {}
        self._thread: threading.Thread | None = None
        self._closed = False

    def add(self, sock: socket.socket) -> Peer:
        """Watch a newly accepted connection for the peer hanging up."""
        peer = Peer(sock)
        with self._lock:
            if self._closed:
                return peer
            fd = sock.fileno()
            self._peers[fd] = peer
            try:
                self._epoll.register(fd, _GONE)
            except (OSError, ValueError):  # closed already: nothing to watch
                del self._peers[fd]
                peer.closed = True
                return peer
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="sem-sidecar-hangups", daemon=True
                )
                self._thread.start()
        return peer

    def discard(self, sock: socket.socket) -> None:
        """Stop watching a connection (before it is closed)."""
        with contextlib.suppress(OSError, ValueError):
            self._forget(sock.fileno(), None)

    @contextlib.contextmanager
    def watching(self, sock: socket.socket, query_id: str) -> Iterator[Peer]:
        """Mark ``sock``'s SEU of ``query_id`` as waiting while the caller waits for it."""
        with self._lock:
            peer = self._peers.get(sock.fileno())
        if peer is None or peer.sock is not sock:
            peer = self.add(sock)
        peer.gone = False
        peer.query_id = query_id
        if peer.closed:  # it hung up before its SEU began to wait
            self._hung_up(peer)
        try:
            yield peer
        finally:
            peer.query_id = None

    def _forget(self, fd: int, peer: Peer | None) -> None:
        with self._lock:
            known = self._peers.get(fd)
            if known is not None and (peer is None or known is peer):
                del self._peers[fd]
                with contextlib.suppress(OSError, ValueError):
                    self._epoll.unregister(fd)

    def _hung_up(self, peer: Peer) -> None:
        query_id = peer.query_id
        if query_id is None or peer.gone:
            return
        peer.gone = True
        log.info("sidecar: a client hung up; cancelling query %s", query_id)
        try:
            self._on_hangup(query_id)
        except Exception as err:  # noqa: BLE001 - the watch must go on
            log.warning("cancelling query %s failed: %s", query_id, err)

    def _run(self) -> None:
        while not self._closed:
            try:
                events = self._epoll.poll(_POLL_S)
            except (OSError, ValueError):  # closed under us
                return
            for fd, _mask in events:
                with self._lock:
                    peer = self._peers.get(fd)
                if peer is None:
                    continue
                peer.closed = True
                self._forget(fd, peer)  # a hang-up is reported once
                self._hung_up(peer)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._peers.clear()
        self._epoll.close()
