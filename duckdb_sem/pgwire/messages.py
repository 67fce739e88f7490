"""PostgreSQL protocol 3.0 framing: read frontend messages, build backend messages.

Only bytes in and bytes out; no sockets, no sessions. Every builder returns one complete
message (type byte, length, payload) ready to be written.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import BinaryIO

from duckdb_sem.errors import MalformedMessageError

__all__ = [
    "CANCEL_REQUEST",
    "GSSENC_REQUEST",
    "MAX_AUTH_MESSAGE",
    "MAX_MESSAGE",
    "PROTOCOL_3",
    "SSL_REQUEST",
    "Field",
    "Message",
    "Reader",
    "auth_ok",
    "auth_sasl",
    "auth_sasl_continue",
    "auth_sasl_final",
    "backend_key_data",
    "bind_complete",
    "close_complete",
    "command_complete",
    "copy_data",
    "copy_done",
    "copy_out_response",
    "data_row",
    "empty_query",
    "error_response",
    "fatal_response",
    "no_data",
    "notice_response",
    "parameter_description",
    "parameter_status",
    "parse_complete",
    "portal_suspended",
    "read_startup",
    "ready_for_query",
    "row_description",
]

PROTOCOL_3 = 196608
SSL_REQUEST = 80877103
CANCEL_REQUEST = 80877102
GSSENC_REQUEST = 80877104
#: the largest message read after authentication (``--max-message``), and before it (SASL
#: messages: PostgreSQL's PG_MAX_AUTH_TOKEN_LENGTH)
MAX_MESSAGE = 64 * 1024 * 1024
MAX_AUTH_MESSAGE = 65535


class ProtocolViolation(Exception):
    """The peer sent bytes that are not valid protocol; the connection is closed."""


@dataclass(frozen=True, slots=True)
class Message:
    kind: bytes  # one ASCII letter
    payload: bytes


@dataclass(frozen=True, slots=True)
class Field:
    """One column of a RowDescription."""

    name: str
    type_oid: int
    type_size: int = -1
    type_mod: int = -1
    format: int = 0  # 0 text, 1 binary


def _read_exact(stream: BinaryIO, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = stream.read(n - len(data))
        if not chunk:
            raise EOFError("client closed the connection")
        data += chunk
    return data


def read_startup(stream: BinaryIO) -> tuple[int, bytes]:
    """The untyped first message: (code, rest of payload)."""
    (length,) = struct.unpack("!i", _read_exact(stream, 4))
    if length < 8 or length > 10_000:
        raise ProtocolViolation(f"bad startup packet length {length}")
    body = _read_exact(stream, length - 4)
    (code,) = struct.unpack("!i", body[:4])
    return code, body[4:]


def read_message(stream: BinaryIO, limit: int = MAX_MESSAGE) -> Message:
    """One typed message; a length over ``limit`` is refused before any of it is read."""
    header = _read_exact(stream, 5)
    (length,) = struct.unpack("!i", header[1:])
    if length < 4:
        raise ProtocolViolation(f"invalid message length {length}")
    if length > limit:
        raise ProtocolViolation(
            f"message of {length} bytes is over this server's limit of {limit} bytes "
            "(duckdb-sem pgwire --max-message)"
        )
    return Message(header[:1], _read_exact(stream, length - 4))


class Reader:
    """Cursor over one payload, with the protocol's primitive types."""

    def __init__(self, payload: bytes) -> None:
        self._data = payload
        self._pos = 0

    def cstring(self) -> str:
        end = self._data.find(b"\0", self._pos)
        if end < 0:
            raise MalformedMessageError("invalid string in message: no terminating zero byte")
        try:
            text = self._data[self._pos : end].decode("utf-8")
        except UnicodeDecodeError as err:
            raise MalformedMessageError(f"invalid byte sequence for encoding UTF8: {err}") from err
        self._pos = end + 1
        return text

    def int16(self) -> int:
        (value,) = struct.unpack("!h", self.raw(2))
        return int(value)

    def int32(self) -> int:
        (value,) = struct.unpack("!i", self.raw(4))
        return int(value)

    def byte(self) -> bytes:
        return self.raw(1)

    def raw(self, n: int) -> bytes:
        if n < 0 or self._pos + n > len(self._data):
            raise MalformedMessageError("insufficient data left in message")
        value = self._data[self._pos : self._pos + n]
        self._pos += n
        return value

    def rest(self) -> bytes:
        value = self._data[self._pos :]
        self._pos = len(self._data)
        return value


def _msg(kind: bytes, payload: bytes = b"") -> bytes:
    return kind + struct.pack("!i", len(payload) + 4) + payload


def _cstr(text: str) -> bytes:
    return text.encode("utf-8") + b"\0"


def auth_ok() -> bytes:
    return _msg(b"R", struct.pack("!i", 0))


def auth_sasl(mechanisms: Sequence[str]) -> bytes:
    return _msg(b"R", struct.pack("!i", 10) + b"".join(_cstr(m) for m in mechanisms) + b"\0")


def auth_sasl_continue(data: bytes) -> bytes:
    return _msg(b"R", struct.pack("!i", 11) + data)


def auth_sasl_final(data: bytes) -> bytes:
    return _msg(b"R", struct.pack("!i", 12) + data)


def parameter_status(name: str, value: str) -> bytes:
    return _msg(b"S", _cstr(name) + _cstr(value))


def backend_key_data(pid: int, secret: int) -> bytes:
    return _msg(b"K", struct.pack("!ii", pid, secret))


def ready_for_query(status: bytes) -> bytes:
    return _msg(b"Z", status)


def row_description(fields: Sequence[Field]) -> bytes:
    parts = [struct.pack("!h", len(fields))]
    for f in fields:
        parts.append(_cstr(f.name))
        parts.append(struct.pack("!ihihih", 0, 0, f.type_oid, f.type_size, f.type_mod, f.format))
    return _msg(b"T", b"".join(parts))


def data_row(values: Iterable[bytes | None]) -> bytes:
    cells = list(values)
    parts = [struct.pack("!h", len(cells))]
    for value in cells:
        if value is None:
            parts.append(b"\xff\xff\xff\xff")
        else:
            parts.append(struct.pack("!i", len(value)))
            parts.append(value)
    return _msg(b"D", b"".join(parts))


def command_complete(tag: str) -> bytes:
    return _msg(b"C", _cstr(tag))


def _fields(severity: str, sqlstate: str, message: str, detail: str | None) -> bytes:
    parts = [
        b"S" + _cstr(severity),
        b"V" + _cstr(severity),
        b"C" + _cstr(sqlstate),
        b"M" + _cstr(message),
    ]
    if detail:
        parts.append(b"D" + _cstr(detail))
    return b"".join(parts) + b"\0"


def error_response(sqlstate: str, message: str, *, detail: str | None = None) -> bytes:
    return _msg(b"E", _fields("ERROR", sqlstate, message, detail))


def fatal_response(sqlstate: str, message: str) -> bytes:
    return _msg(b"E", _fields("FATAL", sqlstate, message, None))


def notice_response(message: str) -> bytes:
    return _msg(b"N", _fields("NOTICE", "00000", message, None))


def parse_complete() -> bytes:
    return _msg(b"1")


def bind_complete() -> bytes:
    return _msg(b"2")


def close_complete() -> bytes:
    return _msg(b"3")


def no_data() -> bytes:
    return _msg(b"n")


def empty_query() -> bytes:
    return _msg(b"I")


def portal_suspended() -> bytes:
    return _msg(b"s")


def parameter_description(oids: Sequence[int]) -> bytes:
    return _msg(b"t", struct.pack(f"!h{len(oids)}i", len(oids), *oids))


def copy_out_response(columns: int) -> bytes:
    """Text-format CopyOutResponse for ``columns`` columns."""
    return _msg(b"H", struct.pack(f"!bh{columns}h", 0, columns, *([0] * columns)))


def copy_data(data: bytes) -> bytes:
    return _msg(b"d", data)


def copy_done() -> bytes:
    return _msg(b"c")
