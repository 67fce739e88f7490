"""A fault-injecting HTTP proxy: put it in front of an LLM server to test what clients survive.

``FaultProxy("http://127.0.0.1:8100", plan=fail_first(3, "503"))`` listens on a free local
port and forwards each HTTP/1.1 request to the upstream server (one upstream connection per
request), except that ``plan(exchange)`` may answer it with a fault instead:

===========  ===================================================================================
fault        what the client sees
===========  ===================================================================================
pass         the upstream answer, unchanged
reset        the connection reset (TCP RST) before any answer
hang         no answer for ``hang_s`` seconds (or until ``close``), then the connection closes
truncate     the upstream status and headers, half the body, then the connection closes
malformed    ``200 OK`` with a JSON body that is not a completion (``{"choices": []}``)
NNN          that HTTP status (``429`` with ``Retry-After: 0``, ``500``, ``503``, ...)
===========  ===================================================================================

Plans are plain functions of an :class:`Exchange`; :func:`fail_first`, :func:`fail_every` and
:func:`fail_seeded` fault only POSTs (completions), so model discovery (``GET /v1/models``)
passes. Works with the sim server (``duckdb-sem sim-server``) and llama.cpp's server. For tests
and deployment drills only: it speaks just enough HTTP/1.1 (``Content-Length`` bodies).

Example:
    >>> plan = fail_first(2, "500")
    >>> [plan(Exchange(n, "POST", "/v1/chat/completions", b"")) for n in range(3)]
    ['500', '500', 'pass']
"""

from __future__ import annotations

import contextlib
import hashlib
import socket
import struct
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = ["Exchange", "FaultProxy", "fail_every", "fail_first", "fail_seeded"]

_MAX_HEAD = 64 * 1024
_REASONS = {429: "Too Many Requests", 500: "Internal Server Error", 502: "Bad Gateway"}


@dataclass(frozen=True, slots=True)
class Exchange:
    """One proxied request: its number (0-based, over all requests), method, path and body."""

    n: int
    method: str
    path: str
    body: bytes


Plan = Callable[[Exchange], str]


def fail_first(k: int, fault: str) -> Plan:
    """The first ``k`` POSTs get ``fault``; everything after passes."""
    seen = _PostCounter()
    return lambda ex: fault if ex.method == "POST" and seen.next() < k else "pass"


def fail_every(n: int, fault: str) -> Plan:
    """Every ``n``-th POST (the 1st, the ``n+1``-th, ...) gets ``fault``; the resend of a POST
    that was just faulted passes and is not counted. Concurrent clients' POSTs interleave, so
    without that a retry could meet the next fault again and again, past any retry budget: a
    test of retries would then depend on thread timing."""
    seen = _PostCounter()
    faulted: set[bytes] = set()
    lock = threading.Lock()

    def plan(ex: Exchange) -> str:
        if ex.method != "POST":
            return "pass"
        with lock:
            if ex.body in faulted:
                faulted.discard(ex.body)
                return "pass"
            if seen.next() % n:
                return "pass"
            faulted.add(ex.body)
            return fault

    return plan


def fail_seeded(rate: float, fault: str, *, seed: int = 0) -> Plan:
    """A seeded-hash fraction ``rate`` of POSTs gets ``fault``: the k-th sending of the same
    body fails or not the same way in every run, so retries of a request can pass."""
    sent: Counter[bytes] = Counter()
    lock = threading.Lock()

    def plan(ex: Exchange) -> str:
        if ex.method != "POST":
            return "pass"
        with lock:
            sent[ex.body] += 1
            k = sent[ex.body]
        digest = hashlib.sha256(f"{seed}:{k}:".encode() + ex.body).digest()
        return fault if int.from_bytes(digest[:8], "big") / 2**64 < rate else "pass"

    return plan


class _PostCounter:
    def __init__(self) -> None:
        self._n = 0
        self._lock = threading.Lock()

    def next(self) -> int:
        with self._lock:
            self._n += 1
            return self._n - 1


class FaultProxy:
    """Forward ``127.0.0.1:port`` to ``upstream``, injecting the faults ``plan`` picks."""

    def __init__(
        self,
        upstream: str,
        *,
        plan: Plan | None = None,
        hang_s: float = 30.0,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        parts = urlsplit(upstream if "://" in upstream else f"http://{upstream}")
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.plan: Plan = plan or (lambda _ex: "pass")
        self.hang_s = hang_s
        self.counts: Counter[str] = Counter()  # fault -> how often it was applied
        self.paths: list[str] = []  # the path of every request, in arrival order
        self._listener = socket.create_server((host, port))
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._clients: set[socket.socket] = set()
        self._n = 0
        self._thread = threading.Thread(target=self._accept, name="fault-proxy", daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._listener.getsockname()[:2]
        return f"http://{host}:{port}"

    def start(self) -> FaultProxy:
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        _close(self._listener)  # shutdown wakes the thread blocked in accept()
        with self._lock:
            clients = list(self._clients)
        for client in clients:
            _close(client)
        self._thread.join(timeout=5)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ---------------------------------------------------------------------------
    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self._clients.add(client)
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        reader = _Reader(client)
        try:
            while not self._stop.is_set():
                request = reader.request()
                if request is None:
                    return
                head, body = request
                method, path = _request_line(head)
                with self._lock:
                    n, self._n = self._n, self._n + 1
                    self.paths.append(path)
                fault = self.plan(Exchange(n, method, path, body))
                with self._lock:
                    self.counts[fault] += 1
                if not self._apply(client, fault, head, body):
                    return
        except OSError:
            return
        finally:
            with self._lock:
                self._clients.discard(client)
            _close(client)

    def _apply(self, client: socket.socket, fault: str, head: bytes, body: bytes) -> bool:
        """Answer one request; False when the client connection is done."""
        if fault == "reset":
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            return False
        if fault == "hang":
            self._stop.wait(self.hang_s)
            return False
        if fault == "malformed":
            client.sendall(_response(200, b'{"object": "chat.completion", "choices": []}'))
            return True
        if fault.isdigit():
            extra = b"Retry-After: 0\r\n" if fault == "429" else b""
            payload = b'{"error": {"message": "injected by FaultProxy", "type": "server_error"}}'
            client.sendall(_response(int(fault), payload, extra))
            return True
        answer = self._forward(head, body)
        if fault == "truncate":
            split = answer.find(b"\r\n\r\n") + 4
            client.sendall(answer[: split + max(1, (len(answer) - split) // 2)])
            return False
        client.sendall(answer)
        return b"\r\nconnection: close" not in answer[: answer.find(b"\r\n\r\n")].lower()

    def _forward(self, head: bytes, body: bytes) -> bytes:
        lines = [
            line
            for line in head.split(b"\r\n")
            if line and not line.lower().startswith((b"connection:", b"keep-alive:"))
        ]
        data = b"\r\n".join(lines) + b"\r\nConnection: close\r\n\r\n" + body
        with socket.create_connection(self.upstream, timeout=120) as up:
            up.sendall(data)
            chunks = []
            while chunk := up.recv(65536):
                chunks.append(chunk)
        return b"".join(chunks)


class _Reader:
    """Reads ``Content-Length`` HTTP/1.1 requests off a keep-alive connection."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""

    def request(self) -> tuple[bytes, bytes] | None:
        while b"\r\n\r\n" not in self.buffer:
            if len(self.buffer) > _MAX_HEAD:
                return None
            chunk = self.sock.recv(65536)
            if not chunk:
                return None
            self.buffer += chunk
        head, _, rest = self.buffer.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        while len(rest) < length:
            chunk = self.sock.recv(65536)
            if not chunk:
                return None
            rest += chunk
        self.buffer = rest[length:]
        return head, rest[:length]


def _request_line(head: bytes) -> tuple[str, str]:
    parts = head.split(b"\r\n", 1)[0].decode("latin-1").split()
    return (parts[0], parts[1]) if len(parts) >= 2 else ("", "")


def _response(status: int, body: bytes, extra: bytes = b"") -> bytes:
    reason = _REASONS.get(status, "Injected").encode()
    return (
        b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n"
        % (status, reason, len(body), extra)
    ) + body


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()
