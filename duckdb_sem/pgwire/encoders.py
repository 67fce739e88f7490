"""Result values onto the wire: PostgreSQL's text and binary formats of each type.

Text is what ``psql`` prints (``t``/``f``, ``NaN``, ``2024-01-02 03:04:05+00``, ``{1,2,NULL}``,
``\\x`` hex for bytea); binary is PostgreSQL's send format (big-endian integers and floats,
days or microseconds since 2000-01-01, base-10000 numeric digits, arrays with a header of
dimensions and element OID). :mod:`.types` pairs them with an OID per Arrow type.

Example: ``text_float(float("inf"))`` is ``b"Infinity"``; ``bin_date(date(2000, 1, 2))`` is
``b"\\x00\\x00\\x00\\x01"``.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import struct
import uuid
from collections.abc import Callable
from typing import Any

from duckdb_sem.pgwire.oids import PG_EPOCH, PG_EPOCH_DATE

__all__ = [
    "Encoder",
    "bin_array",
    "bin_bool",
    "bin_date",
    "bin_interval",
    "bin_numeric",
    "bin_struct",
    "bin_time",
    "bin_timestamp",
    "bin_uuid",
    "text_any",
    "text_array",
    "text_bool",
    "text_bytes",
    "text_float",
    "text_interval",
    "text_str",
    "text_timestamp",
    "text_timestamptz",
]

Encoder = Callable[[Any], bytes]


# -- text encoders ------------------------------------------------------------------------------
def text_bool(v: Any) -> bytes:
    return b"t" if v else b"f"


def text_float(v: Any) -> bytes:
    if math.isnan(v):
        return b"NaN"
    if math.isinf(v):
        return b"Infinity" if v > 0 else b"-Infinity"
    return repr(float(v)).encode()


def _clock(v: Any) -> str:
    """``2024-01-02 03:04:05.5``: as PostgreSQL prints it, trailing zeros of the fraction cut."""
    text: str = v.replace(tzinfo=None).isoformat(sep=" ")
    return text.rstrip("0") if "." in text else text


def text_timestamp(v: Any) -> bytes:
    return _clock(v).encode()


def text_timestamptz(v: Any) -> bytes:
    """In the value's own zone, which is the session's ``TimeZone`` (DuckDB's Arrow results
    carry it): ``2024-01-01 13:00:00+01``, ``+05:30``, ``+00:19:32`` as PostgreSQL writes them."""
    offset = v.utcoffset()
    if offset is None:
        v, offset = v.replace(tzinfo=dt.UTC), dt.timedelta(0)
    seconds = int(offset.total_seconds())
    sign = "-" if seconds < 0 else "+"
    hours, rest = divmod(abs(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    zone = f"{sign}{hours:02d}" + (f":{minutes:02d}" if minutes or secs else "")
    zone += f":{secs:02d}" if secs else ""
    return (_clock(v) + zone).encode()


def text_bytes(v: Any) -> bytes:
    return b"\\x" + bytes(v).hex().encode()


def _interval_parts(v: Any) -> tuple[int, int, int]:
    """(months, days, microseconds) of a timedelta or of Arrow's MonthDayNano (DuckDB INTERVAL)."""
    if hasattr(v, "months"):
        return int(v.months), int(v.days), int(v.nanoseconds) // 1000
    return 0, int(v.days), int(v.seconds) * 1_000_000 + int(v.microseconds)


def _unit(n: int, name: str) -> str:
    return f"{n} {name}" + ("" if abs(n) == 1 else "s")


def text_interval(v: Any) -> bytes:
    """PostgreSQL's ``postgres`` IntervalStyle: ``1 year 2 mons 3 days 04:05:06.789``."""
    months, days, micros = _interval_parts(v)
    years, mons = divmod(abs(months), 12)
    sign = -1 if months < 0 else 1
    parts = [_unit(sign * years, "year")] if years else []
    parts += [_unit(sign * mons, "mon")] if mons else []
    parts += [_unit(days, "day")] if days else []
    if micros or not parts:
        seconds, frac = divmod(abs(micros), 1_000_000)
        hours, rest = divmod(seconds, 3600)
        clock = f"{hours:02d}:{rest // 60:02d}:{rest % 60:02d}" + (f".{frac:06d}" if frac else "")
        parts.append(("-" if micros < 0 else "") + clock)
    return " ".join(parts).encode()


def text_any(v: Any) -> bytes:
    if isinstance(v, dict | list):
        return json.dumps(v, default=str).encode()
    return str(v).encode()


def _array_item(v: Any) -> str:
    if v is None:
        return "NULL"
    text = text_bool(v).decode() if isinstance(v, bool) else str(v)
    if text == "" or any(c in text for c in ',{}"\\ ') or text.upper() == "NULL":
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


def text_array(v: Any) -> bytes:
    return ("{" + ",".join(_array_item(x) for x in v) + "}").encode()


def text_str(v: Any) -> bytes:
    return str(v).encode("utf-8")


# -- binary encoders ----------------------------------------------------------------------------
def bin_struct(fmt: str) -> Encoder:
    """The binary encoder of one value packed with ``struct`` format ``fmt``."""
    packer = struct.Struct(fmt)
    return lambda v: packer.pack(v)


def bin_bool(v: Any) -> bytes:
    return b"\x01" if v else b"\x00"


def bin_date(v: Any) -> bytes:
    return struct.pack("!i", (v - PG_EPOCH_DATE).days)


def bin_timestamp(v: Any) -> bytes:
    if v.tzinfo is not None:
        v = v.astimezone(dt.UTC).replace(tzinfo=None)
    delta = v - PG_EPOCH
    return struct.pack("!q", (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds)


def bin_time(v: Any) -> bytes:
    micros = ((v.hour * 60 + v.minute) * 60 + v.second) * 1_000_000 + v.microsecond
    return struct.pack("!q", micros)


def bin_interval(v: Any) -> bytes:
    months, days, micros = _interval_parts(v)
    return struct.pack("!qii", micros, days, months)


def bin_numeric(v: Any) -> bytes:
    value = decimal.Decimal(v)
    if value.is_nan():
        return struct.pack("!hhhh", 0, 0, 0xC000, 0)
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    dscale = max(0, -exponent)
    text = "".join(map(str, digits))
    # Align to base-10000 groups around the decimal point.
    int_len = len(text) + exponent
    int_part = text[:int_len] if int_len > 0 else ""
    frac_part = text[int_len:] if int_len > 0 else "0" * (-int_len) + text
    int_part = int_part.zfill((len(int_part) + 3) // 4 * 4)
    frac_part = frac_part.ljust((len(frac_part) + 3) // 4 * 4, "0")
    groups = [int(int_part[i : i + 4]) for i in range(0, len(int_part), 4)]
    weight = len(groups) - 1
    groups += [int(frac_part[i : i + 4]) for i in range(0, len(frac_part), 4)]
    while groups and groups[0] == 0:
        groups.pop(0)
        weight -= 1
    while groups and groups[-1] == 0:
        groups.pop()
    if not groups:
        weight = 0
    head = struct.pack("!hhhh", len(groups), weight, 0x4000 if sign else 0, dscale)
    return head + struct.pack(f"!{len(groups)}h", *groups)


def bin_uuid(v: Any) -> bytes:
    return uuid.UUID(str(v)).bytes


def bin_array(element_oid: int, element: Encoder) -> Encoder:
    """The binary encoder of a 1-D array whose elements have type ``element_oid``."""

    def encode(v: Any) -> bytes:
        items = list(v)
        has_null = any(x is None for x in items)
        parts = [struct.pack("!iiiii", 1, int(has_null), element_oid, len(items), 1)]
        for x in items:
            if x is None:
                parts.append(struct.pack("!i", -1))
            else:
                data = element(x)
                parts.append(struct.pack("!i", len(data)) + data)
        return b"".join(parts)

    return encode
