"""Types across the wire: Arrow result types to PostgreSQL OIDs, values to text or binary.

Results come out of DuckDB as Arrow; each column is mapped once to a :class:`PgType` (OID and
encoders). Bound parameters go the other way: text or binary bytes plus the OID the client
declared become Python values for DuckDB (unknown OIDs stay strings, which DuckDB casts
implicitly as it does string literals).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

__all__ = ["OID", "PgType", "decode_param", "pg_type_for", "pg_type_name"]

#: the OIDs used here (pg_type.oid in every PostgreSQL)
OID = {
    "bool": 16,
    "bytea": 17,
    "int8": 20,
    "int2": 21,
    "int4": 23,
    "text": 25,
    "json": 114,
    "float4": 700,
    "float8": 701,
    "varchar": 1043,
    "date": 1082,
    "time": 1083,
    "timestamp": 1114,
    "timestamptz": 1184,
    "interval": 1186,
    "numeric": 1700,
    "uuid": 2950,
    "_bool": 1000,
    "_int2": 1005,
    "_int4": 1007,
    "_text": 1009,
    "_varchar": 1015,
    "_int8": 1016,
    "_float4": 1021,
    "_float8": 1022,
    "_numeric": 1231,
    "unknown": 705,
}
_NAMES = {oid: name for name, oid in OID.items()}
_PG_EPOCH = dt.datetime(2000, 1, 1)
_PG_EPOCH_DATE = dt.date(2000, 1, 1)

Encoder = Callable[[Any], bytes]


@dataclass(frozen=True, slots=True)
class PgType:
    oid: int
    size: int
    text: Encoder
    binary: Encoder


def pg_type_name(oid: int) -> str:
    return _NAMES.get(oid, "text")


# -- text encoders ------------------------------------------------------------------------------
def _text_bool(v: Any) -> bytes:
    return b"t" if v else b"f"


def _text_float(v: Any) -> bytes:
    if math.isnan(v):
        return b"NaN"
    if math.isinf(v):
        return b"Infinity" if v > 0 else b"-Infinity"
    return repr(float(v)).encode()


def _text_timestamp(v: Any) -> bytes:
    text: str = v.isoformat(sep=" ")
    return text.encode()


def _text_timestamptz(v: Any) -> bytes:
    text: str = v.astimezone(dt.UTC).replace(tzinfo=None).isoformat(sep=" ")
    return (text + "+00").encode()


def _text_bytes(v: Any) -> bytes:
    return b"\\x" + bytes(v).hex().encode()


def _text_interval(v: Any) -> bytes:
    total = int(v.total_seconds())
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    micros = v.microseconds
    frac = f".{micros:06d}" if micros else ""
    return f"{days} days {hours:02d}:{minutes:02d}:{seconds:02d}{frac}".encode()


def _text_any(v: Any) -> bytes:
    if isinstance(v, dict | list):
        return json.dumps(v, default=str).encode()
    return str(v).encode()


def _array_item(v: Any) -> str:
    if v is None:
        return "NULL"
    text = _text_bool(v).decode() if isinstance(v, bool) else str(v)
    if text == "" or any(c in text for c in ',{}"\\ ') or text.upper() == "NULL":
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


def _text_array(v: Any) -> bytes:
    return ("{" + ",".join(_array_item(x) for x in v) + "}").encode()


def _text_str(v: Any) -> bytes:
    return str(v).encode("utf-8")


# -- binary encoders ----------------------------------------------------------------------------
def _packer(fmt: str) -> Encoder:
    packer = struct.Struct(fmt)
    return lambda v: packer.pack(v)


def _bin_bool(v: Any) -> bytes:
    return b"\x01" if v else b"\x00"


def _bin_date(v: Any) -> bytes:
    return struct.pack("!i", (v - _PG_EPOCH_DATE).days)


def _bin_timestamp(v: Any) -> bytes:
    if v.tzinfo is not None:
        v = v.astimezone(dt.UTC).replace(tzinfo=None)
    delta = v - _PG_EPOCH
    return struct.pack("!q", (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds)


def _bin_time(v: Any) -> bytes:
    micros = ((v.hour * 60 + v.minute) * 60 + v.second) * 1_000_000 + v.microsecond
    return struct.pack("!q", micros)


def _bin_interval(v: Any) -> bytes:
    micros = v.seconds * 1_000_000 + v.microseconds
    return struct.pack("!qii", micros, v.days, 0)


def _bin_numeric(v: Any) -> bytes:
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


def _bin_uuid(v: Any) -> bytes:
    return uuid.UUID(str(v)).bytes


def _bin_array(element: PgType) -> Encoder:
    def encode(v: Any) -> bytes:
        items = list(v)
        has_null = any(x is None for x in items)
        parts = [struct.pack("!iiiii", 1, int(has_null), element.oid, len(items), 1)]
        for x in items:
            if x is None:
                parts.append(struct.pack("!i", -1))
            else:
                data = element.binary(x)
                parts.append(struct.pack("!i", len(data)) + data)
        return b"".join(parts)

    return encode


_BOOL = PgType(OID["bool"], 1, _text_bool, _bin_bool)
_INT2 = PgType(OID["int2"], 2, _text_str, _packer("!h"))
_INT4 = PgType(OID["int4"], 4, _text_str, _packer("!i"))
_INT8 = PgType(OID["int8"], 8, _text_str, _packer("!q"))
_FLOAT4 = PgType(OID["float4"], 4, _text_float, _packer("!f"))
_FLOAT8 = PgType(OID["float8"], 8, _text_float, _packer("!d"))
_NUMERIC = PgType(OID["numeric"], -1, _text_str, _bin_numeric)
_TEXT = PgType(OID["text"], -1, _text_str, _text_str)
_VARCHAR = PgType(OID["varchar"], -1, _text_str, _text_str)
_BYTEA = PgType(OID["bytea"], -1, _text_bytes, bytes)
_DATE = PgType(OID["date"], 4, _text_str, _bin_date)
_TIME = PgType(OID["time"], 8, _text_str, _bin_time)
_TIMESTAMP = PgType(OID["timestamp"], 8, _text_timestamp, _bin_timestamp)
_TIMESTAMPTZ = PgType(OID["timestamptz"], 8, _text_timestamptz, _bin_timestamp)
_INTERVAL = PgType(OID["interval"], 16, _text_interval, _bin_interval)
_UUID = PgType(OID["uuid"], 16, _text_str, _bin_uuid)
_JSON = PgType(OID["json"], -1, _text_any, _text_any)
_ARRAY_OIDS = {
    OID["bool"]: OID["_bool"],
    OID["int2"]: OID["_int2"],
    OID["int4"]: OID["_int4"],
    OID["int8"]: OID["_int8"],
    OID["float4"]: OID["_float4"],
    OID["float8"]: OID["_float8"],
    OID["numeric"]: OID["_numeric"],
    OID["varchar"]: OID["_varchar"],
    OID["text"]: OID["_text"],
}


def pg_type_for(arrow_type: pa.DataType) -> PgType:
    """The PostgreSQL type a column of ``arrow_type`` is sent as."""
    t = arrow_type
    if pa.types.is_boolean(t):
        return _BOOL
    if pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_uint8(t):
        return _INT2
    if pa.types.is_int32(t) or pa.types.is_uint16(t):
        return _INT4
    if pa.types.is_int64(t) or pa.types.is_uint32(t):
        return _INT8
    if pa.types.is_integer(t):  # uint64 and wider: exact as numeric
        return _NUMERIC
    if pa.types.is_float16(t) or pa.types.is_float32(t):
        return _FLOAT4
    if pa.types.is_floating(t):
        return _FLOAT8
    if pa.types.is_decimal(t):
        return _NUMERIC
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return _VARCHAR
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return _BYTEA
    if pa.types.is_date(t):
        return _DATE
    if pa.types.is_time(t):
        return _TIME
    if pa.types.is_timestamp(t):
        return _TIMESTAMPTZ if t.tz else _TIMESTAMP
    if pa.types.is_duration(t) or pa.types.is_interval(t):
        return _INTERVAL
    if isinstance(t, pa.ExtensionType) and "uuid" in str(t).lower():
        return _UUID
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        element = pg_type_for(t.value_type)
        array_oid = _ARRAY_OIDS.get(element.oid)
        if array_oid is not None:
            return PgType(array_oid, -1, _text_array, _bin_array(element))
        return _JSON
    if pa.types.is_struct(t) or pa.types.is_map(t):
        return _JSON
    return _TEXT


# -- parameters ---------------------------------------------------------------------------------
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
    OID["date"]: lambda b: _PG_EPOCH_DATE + dt.timedelta(days=struct.unpack("!i", b)[0]),
    OID["timestamp"]: lambda b: _PG_EPOCH + dt.timedelta(microseconds=struct.unpack("!q", b)[0]),
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
