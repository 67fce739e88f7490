"""Types across the wire: Arrow result types to PostgreSQL OIDs, values to text or binary.

Results come out of DuckDB as Arrow; each column is mapped once to a :class:`PgType` (OID and
encoders). Bound parameters go the other way: text or binary bytes plus the OID the client
declared become Python values for DuckDB (unknown OIDs stay strings, which DuckDB casts
implicitly as it does string literals).

The OIDs are :mod:`.oids`; the text and binary encoders :mod:`.encoders`, :mod:`.datetimes`,
:mod:`.numbers` and :mod:`.arrays`, each over the values :mod:`.columns` reads; decoding bound
parameters :mod:`.params` (re-exported here with the OIDs).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from duckdb_sem.pgwire.arrays import bin_array, text_array
from duckdb_sem.pgwire.columns import (
    Values,
    date_values,
    interval_values,
    list_values,
    pylist,
    time_values,
    timestamp_values,
)
from duckdb_sem.pgwire.datetimes import (
    bin_date,
    bin_interval,
    bin_time,
    bin_timestamp,
    text_date,
    text_interval,
    text_time,
    text_timestamp,
    text_timestamptz,
)
from duckdb_sem.pgwire.encoders import (
    Encoder,
    bin_bool,
    bin_numeric,
    bin_struct,
    bin_uuid,
    text_any,
    text_bool,
    text_bytes,
    text_str,
)
from duckdb_sem.pgwire.numbers import text_float4, text_float8, text_numeric
from duckdb_sem.pgwire.oids import OID, pg_type_name
from duckdb_sem.pgwire.params import decode_param

__all__ = ["OID", "PgType", "decode_param", "pg_type_for", "pg_type_name"]


@dataclass(frozen=True, slots=True)
class PgType:
    oid: int
    size: int
    text: Encoder
    binary: Encoder
    #: an Arrow column as the values ``text`` and ``binary`` take (:mod:`.columns`)
    values: Values = pylist


_BOOL = PgType(OID["bool"], 1, text_bool, bin_bool)
_INT2 = PgType(OID["int2"], 2, text_str, bin_struct("!h"))
_INT4 = PgType(OID["int4"], 4, text_str, bin_struct("!i"))
_INT8 = PgType(OID["int8"], 8, text_str, bin_struct("!q"))
_FLOAT4 = PgType(OID["float4"], 4, text_float4, bin_struct("!f"))
_FLOAT8 = PgType(OID["float8"], 8, text_float8, bin_struct("!d"))
_NUMERIC = PgType(OID["numeric"], -1, text_numeric, bin_numeric)
_TEXT = PgType(OID["text"], -1, text_str, text_str)
_VARCHAR = PgType(OID["varchar"], -1, text_str, text_str)
_BYTEA = PgType(OID["bytea"], -1, text_bytes, bytes)
_DATE = PgType(OID["date"], 4, text_date, bin_date, date_values)
_TIME = PgType(OID["time"], 8, text_time, bin_time, time_values)
_TIMESTAMP = PgType(OID["timestamp"], 8, text_timestamp, bin_timestamp, timestamp_values)
_INTERVAL = PgType(OID["interval"], 16, text_interval, bin_interval, interval_values)
_UUID = PgType(OID["uuid"], 16, text_str, bin_uuid)
_JSON = PgType(OID["json"], -1, text_any, text_any)
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
    OID["bytea"]: OID["_bytea"],
    OID["date"]: OID["_date"],
    OID["time"]: OID["_time"],
    OID["timestamp"]: OID["_timestamp"],
    OID["timestamptz"]: OID["_timestamptz"],
    OID["interval"]: OID["_interval"],
    OID["uuid"]: OID["_uuid"],
}
_LISTS = (pa.types.is_list, pa.types.is_large_list, pa.types.is_fixed_size_list)


def _timestamptz(zone: str) -> PgType:
    text = text_timestamptz(zone)
    return PgType(OID["timestamptz"], 8, text, bin_timestamp, timestamp_values)


def _array(list_type: pa.DataType) -> PgType:
    """A list of lists ... of ``t`` is an array of ``t`` with one dimension per list."""
    depth, inner = 0, list_type
    while any(is_list(inner) for is_list in _LISTS):
        depth, inner = depth + 1, inner.value_type
    element = pg_type_for(inner)
    array_oid = _ARRAY_OIDS.get(element.oid)
    if array_oid is None:
        return _JSON
    values = element.values
    for _ in range(depth):
        values = list_values(values)
    binary = bin_array(element.oid, element.binary, depth=depth)
    return PgType(array_oid, -1, text_array(element.text), binary, values)


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
        return _timestamptz(t.tz) if t.tz else _TIMESTAMP
    if pa.types.is_duration(t) or pa.types.is_interval(t):
        return _INTERVAL
    if isinstance(t, pa.ExtensionType) and "uuid" in str(t).lower():
        return _UUID
    if any(is_list(t) for is_list in _LISTS):
        return _array(t)
    if pa.types.is_struct(t) or pa.types.is_map(t):
        return _JSON
    return _TEXT
