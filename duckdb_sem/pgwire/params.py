"""Bound parameters off the wire: text or binary bytes to the Python values DuckDB gets.

A parameter arrives as bytes in the format the client chose, with the OID it declared (or 0).
Known OIDs are parsed to Python values; unknown ones stay strings, which DuckDB casts
implicitly as it does string literals.

Example: ``decode_param(b"42", OID["int4"], binary=False)`` is ``42``;
``decode_param(b"\\x00\\x00\\x00\\x2a", OID["int4"], binary=True)`` too.
"""

from __future__ import annotations

import datetime as dt
import decimal
import struct
from collections.abc import Callable
from typing import Any

from duckdb_sem.pgwire.oids import OID, PG_EPOCH, PG_EPOCH_DATE

__all__ = ["decode_param"]


def _parse_bool(text: str) -> bool:
    return text.strip().lower() in {"t", "true", "1", "y", "yes", "on"}


_TEXT_PARAMS: dict[int, Callable[[str], Any]] = {
    OID["bool"]: _parse_bool,
    OID["int2"]: int,
    OID["int4"]: int,
    OID["int8"]: int,
    OID["float4"]: float,
    OID["float8"]: float,
    OID["numeric"]: decimal.Decimal,
    OID["date"]: dt.date.fromisoformat,
}

_BINARY_PARAMS: dict[int, Callable[[bytes], Any]] = {
    OID["bool"]: lambda b: b != b"\x00",
    OID["int2"]: lambda b: struct.unpack("!h", b)[0],
    OID["int4"]: lambda b: struct.unpack("!i", b)[0],
    OID["int8"]: lambda b: struct.unpack("!q", b)[0],
    OID["float4"]: lambda b: struct.unpack("!f", b)[0],
    OID["float8"]: lambda b: struct.unpack("!d", b)[0],
    OID["date"]: lambda b: PG_EPOCH_DATE + dt.timedelta(days=struct.unpack("!i", b)[0]),
    OID["timestamp"]: lambda b: PG_EPOCH + dt.timedelta(microseconds=struct.unpack("!q", b)[0]),
    OID["bytea"]: bytes,
}


def decode_param(data: bytes | None, oid: int, *, binary: bool) -> Any:
    """A bound parameter as the Python value DuckDB gets."""
    if data is None:
        return None
    if binary:
        decoder = _BINARY_PARAMS.get(oid)
        if decoder is not None:
            return decoder(data)
        return data.decode("utf-8")
    text = data.decode("utf-8")
    parser = _TEXT_PARAMS.get(oid)
    return parser(text) if parser is not None else text
