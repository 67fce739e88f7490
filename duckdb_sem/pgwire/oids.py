"""PostgreSQL's type constants on the wire: the type OIDs used here and the binary epoch.

Every PostgreSQL has the same ``pg_type.oid`` for its built-in types; a RowDescription names a
column's type by OID, and a client's Parse declares its parameters' types the same way. Binary
dates and timestamps count days or microseconds from 2000-01-01.

Example: ``OID["int8"]`` is 20, and ``pg_type_name(20)`` is ``"int8"``.
"""

from __future__ import annotations

import datetime as dt

__all__ = ["OID", "PG_EPOCH", "PG_EPOCH_DATE", "pg_type_name"]

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
    # further types a client may declare for a parameter (psycopg, asyncpg, JDBC)
    "char": 18,
    "name": 19,
    "oid": 26,
    "jsonb": 3802,
    "bpchar": 1042,
    "timetz": 1266,
    "_json": 199,
    "_bytea": 1001,
    "_bpchar": 1014,
    "_date": 1182,
    "_time": 1183,
    "_timestamp": 1115,
    "_timestamptz": 1185,
    "_interval": 1187,
    "_timetz": 1270,
    "_uuid": 2951,
    "_jsonb": 3807,
    "_oid": 1028,
}
_NAMES = {oid: name for name, oid in OID.items()}
PG_EPOCH = dt.datetime(2000, 1, 1)
PG_EPOCH_DATE = dt.date(2000, 1, 1)


def pg_type_name(oid: int) -> str:
    return _NAMES.get(oid, "text")
