"""Types across the wire: Arrow result types to PostgreSQL OIDs, values to text or binary.

Results come out of DuckDB as Arrow; each column is mapped once to a :class:`PgType` (OID and
encoders). Bound parameters go the other way: text or binary bytes plus the OID the client
declared become Python values for DuckDB (unknown OIDs stay strings, which DuckDB casts
implicitly as it does string literals).

The OIDs are :mod:`.oids`; the text and binary encoders :mod:`.encoders`; decoding bound
parameters :mod:`.params` (re-exported here with the OIDs).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from duckdb_sem.pgwire.encoders import (
    Encoder,
    bin_array,
    bin_bool,
    bin_date,
    bin_interval,
    bin_numeric,
    bin_struct,
    bin_time,
    bin_timestamp,
    bin_uuid,
    text_any,
    text_array,
    text_bool,
    text_bytes,
    text_float,
    text_interval,
    text_str,
    text_timestamp,
    text_timestamptz,
)
from duckdb_sem.pgwire.oids import OID, pg_type_name
from duckdb_sem.pgwire.params import decode_param

__all__ = ["OID", "PgType", "decode_param", "pg_type_for", "pg_type_name"]


@dataclass(frozen=True, slots=True)
class PgType:
    oid: int
    size: int
    text: Encoder
    binary: Encoder


_BOOL = PgType(OID["bool"], 1, text_bool, bin_bool)
_INT2 = PgType(OID["int2"], 2, text_str, bin_struct("!h"))
_INT4 = PgType(OID["int4"], 4, text_str, bin_struct("!i"))
_INT8 = PgType(OID["int8"], 8, text_str, bin_struct("!q"))
_FLOAT4 = PgType(OID["float4"], 4, text_float, bin_struct("!f"))
_FLOAT8 = PgType(OID["float8"], 8, text_float, bin_struct("!d"))
_NUMERIC = PgType(OID["numeric"], -1, text_str, bin_numeric)
_TEXT = PgType(OID["text"], -1, text_str, text_str)
_VARCHAR = PgType(OID["varchar"], -1, text_str, text_str)
_BYTEA = PgType(OID["bytea"], -1, text_bytes, bytes)
_DATE = PgType(OID["date"], 4, text_str, bin_date)
_TIME = PgType(OID["time"], 8, text_str, bin_time)
_TIMESTAMP = PgType(OID["timestamp"], 8, text_timestamp, bin_timestamp)
_TIMESTAMPTZ = PgType(OID["timestamptz"], 8, text_timestamptz, bin_timestamp)
_INTERVAL = PgType(OID["interval"], 16, text_interval, bin_interval)
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
            return PgType(array_oid, -1, text_array, bin_array(element.oid, element.binary))
        return _JSON
    if pa.types.is_struct(t) or pa.types.is_map(t):
        return _JSON
    return _TEXT
