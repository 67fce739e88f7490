"""Binary bound parameters: PostgreSQL's ``*_recv`` formats read into Python values.

A client that binds a parameter in binary sends the bytes PostgreSQL's ``*_send`` function of the
declared type writes (``src/backend/utils/adt/*.c``): big-endian integers and IEEE floats,
base-10000 numeric digits with a weight, sign and display scale, days or microseconds since
2000-01-01, a time zone as seconds *west* of UTC, an interval as (microseconds, days, months),
arrays with a header of dimensions and element OID. These are the formats psycopg, asyncpg and
JDBC write; psycopg's own loaders read the same bytes, and the tests check this module against
them. Infinite dates and timestamps come back as the strings ``'infinity'``/``'-infinity'``,
which DuckDB casts to its own infinities (Python's ``date`` has none).

Example: ``numeric(bytes.fromhex("0001000040000000") + b"\\x00\\x01")`` is ``Decimal("-1")``.
"""

from __future__ import annotations

import datetime as dt
import decimal
import struct
import uuid
from collections.abc import Callable
from typing import Any

from duckdb_sem.pgwire.oids import PG_EPOCH, PG_EPOCH_DATE

__all__ = [
    "Recv",
    "array",
    "date",
    "interval",
    "jsonb",
    "numeric",
    "time",
    "timestamp",
    "timestamptz",
    "timetz",
    "uuid_",
]

Recv = Callable[[bytes], Any]

_INT32_MAX, _INT32_MIN = 2**31 - 1, -(2**31)
_INT64_MAX, _INT64_MIN = 2**63 - 1, -(2**63)
_NUMERIC_NEG, _NUMERIC_NAN, _NUMERIC_PINF, _NUMERIC_NINF = 0x4000, 0xC000, 0xD000, 0xF000
#: room for numeric's 131072 digits before and 16383 after the point
_EXACT = decimal.Context(prec=150_000, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)


def _unpack(fmt: str, data: bytes) -> tuple[Any, ...]:
    if struct.calcsize(fmt) != len(data):
        raise ValueError(f"expected {struct.calcsize(fmt)} bytes, got {len(data)}")
    return struct.unpack(fmt, data)


def numeric(data: bytes) -> decimal.Decimal:
    """``numeric_recv``: ndigits, weight, sign, dscale (int16 each), then base-10000 digits."""
    ndigits, weight, sign, dscale = struct.unpack_from("!hhHH", data)
    digits = _unpack(f"!{ndigits}h", data[8:])
    if sign == _NUMERIC_NAN:
        return decimal.Decimal("NaN")
    if sign in {_NUMERIC_PINF, _NUMERIC_NINF}:
        return decimal.Decimal("Infinity" if sign == _NUMERIC_PINF else "-Infinity")
    if sign not in {0, _NUMERIC_NEG} or any(not 0 <= d < 10_000 for d in digits):
        raise ValueError("invalid sign or digit in external numeric value")
    text = "".join(f"{d:04d}" for d in digits) or "0"
    exponent = (weight - ndigits + 1) * 4 if ndigits else 0
    value = decimal.Decimal(("-" if sign == _NUMERIC_NEG else "") + text + f"E{exponent}")
    # As PostgreSQL prints it: exactly ``dscale`` digits after the point.
    return value.quantize(decimal.Decimal(1).scaleb(-dscale), context=_EXACT)


def date(data: bytes) -> dt.date | str:
    (days,) = _unpack("!i", data)
    if days in {_INT32_MAX, _INT32_MIN}:
        return "infinity" if days == _INT32_MAX else "-infinity"
    return PG_EPOCH_DATE + dt.timedelta(days=days)


def _clock(micros: int) -> dt.time:
    if not 0 <= micros <= 86_400_000_000:
        raise ValueError("time out of range")
    if micros == 86_400_000_000:  # PostgreSQL's 24:00:00; Python stops a microsecond before
        micros -= 1
    seconds, fraction = divmod(micros, 1_000_000)
    return dt.time(seconds // 3600, seconds // 60 % 60, seconds % 60, fraction)


def time(data: bytes) -> dt.time:
    return _clock(_unpack("!q", data)[0])


def timetz(data: bytes) -> dt.time:
    """``timetz_recv``: microseconds, then the zone in seconds west of UTC (-3600 is +01)."""
    micros, west = _unpack("!qi", data)
    return _clock(micros).replace(tzinfo=dt.timezone(dt.timedelta(seconds=-west)))


def timestamp(data: bytes) -> dt.datetime | str:
    (micros,) = _unpack("!q", data)
    if micros in {_INT64_MAX, _INT64_MIN}:
        return "infinity" if micros == _INT64_MAX else "-infinity"
    return PG_EPOCH + dt.timedelta(microseconds=micros)


def timestamptz(data: bytes) -> dt.datetime | str:
    value = timestamp(data)
    return value if isinstance(value, str) else value.replace(tzinfo=dt.UTC)


def interval(data: bytes) -> dt.timedelta | str:
    """``interval_recv``; months (no timedelta has them) as text DuckDB casts to INTERVAL."""
    micros, days, months = _unpack("!qii", data)
    if months:
        return f"{months} months {days} days {micros} microseconds"
    return dt.timedelta(days=days, microseconds=micros)


def uuid_(data: bytes) -> uuid.UUID:
    return uuid.UUID(bytes=_unpack("!16s", data)[0])


def jsonb(data: bytes) -> str:
    """``jsonb_recv``: a version byte (1), then the JSON text."""
    if data[:1] != b"\x01":
        raise ValueError(f"unsupported jsonb version number {data[:1]!r}")
    return data[1:].decode("utf-8")


def array(data: bytes, element: Callable[[int], Recv]) -> list[Any]:
    """``array_recv``: ndim, has-null flag, element OID, (size, lower bound) per dimension,
    then each element as a length (-1: NULL) and its bytes; ``element(oid)`` reads one."""
    ndim, _, oid = struct.unpack_from("!iii", data)
    if not 0 <= ndim <= 6:
        raise ValueError(f"invalid number of dimensions: {ndim}")
    sizes = [struct.unpack_from("!ii", data, 12 + 8 * i)[0] for i in range(ndim)]
    at = 12 + 8 * ndim
    read = element(oid)
    flat: list[Any] = []
    total = 1 if sizes else 0
    for size in sizes:
        total *= size
    for _ in range(total):
        (length,) = struct.unpack_from("!i", data, at)
        at += 4
        if length < 0:
            flat.append(None)
            continue
        if at + length > len(data):
            raise ValueError("insufficient data left in message")
        flat.append(read(data[at : at + length]))
        at += length
    if at != len(data):
        raise ValueError("incorrect binary data format in array")
    for size in reversed(sizes[1:]):  # fold the flat elements into nested lists
        flat = [flat[i : i + size] for i in range(0, len(flat), size)]
    return flat
