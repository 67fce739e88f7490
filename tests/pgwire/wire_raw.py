"""A bare protocol-3.0 client for tests that must send what no real client sends."""

from __future__ import annotations

import socket
import struct

PROTOCOL_3 = 196608


def startup(port: int, *, user: str = "tester", database: str = "sem") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    body = (
        struct.pack("!i", PROTOCOL_3)
        + b"".join(
            k.encode() + b"\0" + v.encode() + b"\0"
            for k, v in (("user", user), ("database", database))
        )
        + b"\0"
    )
    sock.sendall(struct.pack("!i", len(body) + 4) + body)
    return sock


def read_message(sock: socket.socket) -> tuple[bytes, bytes]:
    """(type byte, payload); (b"", b"") when the server closed the connection."""
    header = _exact(sock, 5)
    if len(header) < 5:
        return b"", b""
    (length,) = struct.unpack("!i", header[1:])
    return header[:1], _exact(sock, length - 4)


def until_ready(sock: socket.socket) -> list[tuple[bytes, bytes]]:
    """Messages up to ReadyForQuery (or the connection's end)."""
    out = []
    while True:
        kind, payload = read_message(sock)
        out.append((kind, payload))
        if kind in {b"Z", b""}:
            return out


def error_fields(payload: bytes) -> dict[str, str]:
    return {f[:1]: f[1:] for f in payload.decode().split("\0") if f}


def _exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    return data
