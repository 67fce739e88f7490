"""Bound parameters off the wire: text or binary bytes to the typed values DuckDB binds.

A parameter arrives as bytes in the format the client chose, with the OID it declared (or 0).
As in PostgreSQL, a declared type is the parameter's type: ``SELECT $1`` with an ``int2``
parameter returns a smallint, with ``json`` a json. So each known OID becomes a
``duckdb.Value`` of the matching DuckDB type (DuckDB then binds it with that type). Binary bytes
are read by :mod:`.recv` (PostgreSQL's send/recv formats); text is handed to DuckDB's cast,
except where DuckDB reads it differently (:mod:`.text_input`). ``numeric`` has no DuckDB type of
unbounded precision: it is a ``Decimal``, which DuckDB binds as ``DECIMAL(p,s)`` of its digits
(``NaN``/``Infinity``, which DECIMAL lacks, as DOUBLE). Unknown OIDs (0, or a type not listed)
stay strings, which DuckDB casts implicitly as it does string literals.

A value that is not valid in its declared type fails as PostgreSQL's does: 22P02 for text,
22P03 for binary, 22021 for bytes that are not UTF-8.

Example: ``decode_param(b"42", OID["int4"], binary=False)`` is ``Value("42", INTEGER)``;
``decode_param(b"\\x00\\x00\\x00\\x2a", OID["int4"], binary=True)`` is ``Value(42, INTEGER)``.
"""

from __future__ import annotations

import decimal
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import duckdb
from duckdb import sqltypes as t

from duckdb_sem.errors import ParameterError
from duckdb_sem.pgwire import recv
from duckdb_sem.pgwire.oids import OID
from duckdb_sem.pgwire.text_input import parse_array, parse_bool, parse_bytea

__all__ = ["ParamType", "decode_param"]


@dataclass(frozen=True, slots=True)
class ParamType:
    """How one declared type is read: its DuckDB type (None: the value's own, for numeric),
    its binary reader, and its text reader (None: DuckDB casts the string)."""

    duck: t.DuckDBPyType | None
    binary: recv.Recv
    text: Callable[[str], Any] | None = None


def _utf8(data: bytes) -> str:
    return data.decode("utf-8")


def _fixed(fmt: str) -> recv.Recv:
    packer = struct.Struct(fmt)

    def read(data: bytes) -> Any:
        return packer.unpack(data)[0]

    return read


_VARCHAR = ParamType(t.VARCHAR, _utf8, str)
_JSON = ParamType(duckdb.dtype("JSON"), _utf8, str)
_TYPES: dict[int, ParamType] = {
    OID["bool"]: ParamType(t.BOOLEAN, _fixed("!?"), parse_bool),
    OID["int2"]: ParamType(t.SMALLINT, _fixed("!h")),
    OID["int4"]: ParamType(t.INTEGER, _fixed("!i")),
    OID["int8"]: ParamType(t.BIGINT, _fixed("!q")),
    OID["oid"]: ParamType(t.UINTEGER, _fixed("!I")),
    OID["float4"]: ParamType(t.FLOAT, _fixed("!f")),
    OID["float8"]: ParamType(t.DOUBLE, _fixed("!d")),
    OID["numeric"]: ParamType(None, recv.numeric, lambda s: decimal.Decimal(s.strip())),
    OID["text"]: _VARCHAR,
    OID["varchar"]: _VARCHAR,
    OID["bpchar"]: _VARCHAR,
    OID["name"]: _VARCHAR,
    OID["char"]: _VARCHAR,
    OID["bytea"]: ParamType(t.BLOB, bytes, parse_bytea),
    OID["uuid"]: ParamType(t.UUID, recv.uuid_),
    OID["date"]: ParamType(t.DATE, recv.date),
    OID["time"]: ParamType(t.TIME, recv.time),
    OID["timetz"]: ParamType(t.TIME_TZ, recv.timetz),
    OID["timestamp"]: ParamType(t.TIMESTAMP, recv.timestamp),
    OID["timestamptz"]: ParamType(t.TIMESTAMP_TZ, recv.timestamptz),
    OID["interval"]: ParamType(t.INTERVAL, recv.interval),
    OID["json"]: _JSON,
    OID["jsonb"]: ParamType(duckdb.dtype("JSON"), recv.jsonb, str),
}
#: array OID -> element OID
_ARRAYS: dict[int, int] = {
    OID[f"_{name}"]: OID[name]
    for name in (
        "bool", "int2", "int4", "int8", "oid", "float4", "float8", "numeric", "text", "varchar",
        "bpchar", "bytea", "uuid", "date", "time", "timetz", "timestamp", "timestamptz",
        "interval", "json", "jsonb",
    )
}  # fmt: skip


def decode_param(data: bytes | None, oid: int, *, binary: bool) -> Any:
    """A bound parameter as the value DuckDB binds (see the module docstring)."""
    if data is None:
        return None
    try:
        if oid in _ARRAYS:
            return _array(data, _TYPES[_ARRAYS[oid]], binary=binary)
        kind = _TYPES.get(oid)
        if kind is None:
            return _utf8(data)
        value = kind.binary(data) if binary else _text(kind, _utf8(data))
        return _typed(value, kind.duck)
    except UnicodeDecodeError as err:
        raise ParameterError(
            f"invalid byte sequence for encoding UTF8 in a parameter: {err.reason}",
            sqlstate="22021",
        ) from err
    except (ValueError, struct.error, decimal.InvalidOperation, IndexError) as err:
        if binary:
            raise ParameterError(
                f"incorrect binary data format in a parameter of type OID {oid}: {err}",
                sqlstate="22P03",
            ) from err
        raise ParameterError(
            f"invalid input syntax in a parameter of type OID {oid}: {err}"
        ) from err


def _text(kind: ParamType, text: str) -> Any:
    return text if kind.text is None else kind.text(text)


def _typed(value: Any, duck: t.DuckDBPyType | None) -> Any:
    if duck is not None:
        return duckdb.Value(value, duck)
    if _is_special(value):
        return duckdb.Value(float(value), t.DOUBLE)  # DECIMAL has no NaN or infinity
    return value


def _array(data: bytes, element: ParamType, *, binary: bool) -> Any:
    if binary:
        items = recv.array(data, lambda _oid: element.binary)
    else:
        items = _leaves(parse_array(_utf8(data)), lambda s: _text(element, s))
    if element.duck is None:  # numeric: DuckDB types the list by its Decimals
        return _leaves(items, lambda v: float(v) if _is_special(v) else v)
    duck = element.duck
    for _ in range(_depth(items)):
        duck = duckdb.list_type(duck)
    return duckdb.Value(items, duck)


def _is_special(value: Any) -> bool:
    return isinstance(value, decimal.Decimal) and not value.is_finite()


def _leaves(items: list[Any], fn: Callable[[Any], Any]) -> list[Any]:
    return [
        None if x is None else (_leaves(x, fn) if isinstance(x, list) else fn(x)) for x in items
    ]


def _depth(items: list[Any]) -> int:
    depth = 1
    while items and isinstance(items[0], list):
        depth += 1
        items = items[0]
    return depth
