"""HTTP clients for a backend's request threads: one connection per thread, never shared.

An ``httpx.Client`` pools connections for all the threads that use it, and httpcore's pool is
unsafe with many of them: each pass over the pool closes idle connections beyond
``max_keepalive_connections`` (20 by default) and expired ones, and it can close a connection it
has just handed to another thread that is already sending on it (encode/httpcore#1110). That
request then waits for an answer on a closed socket until its read timeout (60 s), which is
what stopped the SIMULATED LOTUS benchmark at Q2 with 128 request threads. Sizing one shared
pool to the thread count avoids the close but makes every request poll each idle connection for
readability (hundreds of system calls per request, under the GIL).

So every request thread of a backend's executor gets its own client holding one connection
(:meth:`ThreadClients.open_for_thread` is the executor's initializer), and the other callers
(discovery, ``/metrics``, ``/tokenize``) share a small pool that never closes an idle connection
itself: no pass can reach a connection another thread is using.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Any

import httpx

__all__ = ["ThreadClients"]


class ThreadClients:
    """One client per request thread, plus :attr:`shared` for every other thread."""

    def __init__(
        self,
        *,
        headers: dict[str, str],
        timeout: float,
        transport: httpx.BaseTransport | None = None,
        shared_connections: int = 8,
    ) -> None:
        self._headers = headers
        self._timeout = timeout
        self._transport = transport
        # one TLS context for all clients: httpx builds one per client otherwise (~25 ms each)
        self._ssl = httpx.create_ssl_context()
        self._local = threading.local()
        self._lock = threading.Lock()
        self._owned: list[httpx.Client] = []
        self._closed = False
        n = shared_connections
        self.shared = self._client(
            httpx.Limits(max_connections=n, max_keepalive_connections=n, keepalive_expiry=None)
        )

    def open_for_thread(self) -> None:
        """Give the calling thread its own client (an executor's ``initializer``)."""
        client = self._client(httpx.Limits(max_connections=1, max_keepalive_connections=1))
        with self._lock:
            if self._closed:
                client.close()
                return
            self._owned.append(client)
        self._local.client = client

    def current(self) -> httpx.Client:
        """The calling thread's own client, else the shared one."""
        client: httpx.Client | None = getattr(self._local, "client", None)
        return client if client is not None else self.shared

    def interrupt(self, client: httpx.Client) -> None:
        """Shut down the sockets of ``client``'s connections, so a request waiting on one fails
        at once (closing a socket does not wake a thread blocked reading it; shutting it down
        does). Best effort: it reads httpcore's pool, and does nothing on other transports."""
        transport: Any = getattr(client, "_transport", None)
        pool: Any = getattr(transport, "_pool", None)
        for pooled in list(getattr(pool, "connections", ())):
            stream: Any = getattr(getattr(pooled, "_connection", None), "_network_stream", None)
            sock = stream.get_extra_info("socket") if stream is not None else None
            if isinstance(sock, socket.socket):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            owned, self._owned = self._owned, []
        for client in owned:
            client.close()
        self.shared.close()

    def _client(self, limits: httpx.Limits) -> httpx.Client:
        return httpx.Client(
            headers=self._headers,
            timeout=self._timeout,
            transport=self._transport,
            verify=self._ssl,
            limits=limits,
        )
