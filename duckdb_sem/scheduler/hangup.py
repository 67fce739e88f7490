"""Notice a sidecar client that hangs up while its SEU waits, and cancel the SEU's query.

A sidecar handler thread blocks on an SEU's future until the scheduler answers it; without a
watch, a client process that died (or closed its connection) would leave its queries queued
and running until they finished for nobody. :class:`HangupWatch` keeps one ``epoll`` over the
connections whose SEUs wait: HTTP/1.1 clients send nothing more on a connection before its
answer, so a connection that becomes readable while it waits has been closed by the peer
(``recv(MSG_PEEK)`` returns nothing, or the kernel says ``EPOLLRDHUP``/``EPOLLHUP``). Then the
watch calls ``on_hangup(query_id)`` (the scheduler's ``cancel``) and marks the wait, so the
handler drops the connection instead of answering it.

Example:
    >>> watch = HangupWatch(print)
    >>> # with watch.watching(connection, seu.query_id) as peer:
    >>> #     concurrent.futures.wait([future])
    >>> # if peer.gone: ... the client left; do not answer
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
    """One watched wait: ``gone`` turns true when the client hung up during it."""

    sock: socket.socket
    query_id: str
    gone: bool = False


class HangupWatch:
    """One thread and one ``epoll`` for every connection whose SEU waits (thread-safe)."""

    def __init__(self, on_hangup: Callable[[str], None]) -> None:
        self._on_hangup = on_hangup
        self._epoll = select.epoll()
        self._lock = threading.Lock()
        self._peers: dict[int, Peer] = {}
        self._thread: threading.Thread | None = None
        self._closed = False

    @contextlib.contextmanager
    def watching(self, sock: socket.socket, query_id: str) -> Iterator[Peer]:
        """Watch ``sock`` while the caller waits for its SEU's answer."""
        peer = Peer(sock, query_id)
        fd = sock.fileno()
        with self._lock:
            if self._closed:
                yield peer
                return
            self._peers[fd] = peer
            self._epoll.register(fd, select.EPOLLIN | select.EPOLLRDHUP)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="sem-sidecar-hangups", daemon=True
                )
                self._thread.start()
        try:
            yield peer
        finally:
            self._forget(fd, peer)

    def _forget(self, fd: int, peer: Peer) -> None:
        with self._lock:
            if self._peers.get(fd) is peer:
                del self._peers[fd]
                with contextlib.suppress(OSError, ValueError):
                    self._epoll.unregister(fd)

    def _run(self) -> None:
        while not self._closed:
            try:
                events = self._epoll.poll(_POLL_S)
            except (OSError, ValueError):  # closed under us
                return
            for fd, mask in events:
                with self._lock:
                    peer = self._peers.get(fd)
                if peer is None:
                    continue
                gone = bool(mask & _GONE) or _closed_by_peer(peer.sock)
                self._forget(fd, peer)  # readable and not closed: not ours to read, stop
                if gone:
                    peer.gone = True
                    log.info("sidecar: a client hung up; cancelling query %s", peer.query_id)
                    try:
                        self._on_hangup(peer.query_id)
                    except Exception as err:  # noqa: BLE001 - the watch must go on
                        log.warning("cancelling query %s failed: %s", peer.query_id, err)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._peers.clear()
        self._epoll.close()


def _closed_by_peer(sock: socket.socket) -> bool:
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
