"""Values on the wire as PostgreSQL 15 sends them: the same literals, byte for byte.

Each case is one value computed by PostgreSQL and by the wire server (DuckDB SQL where the
spelling differs: DuckDB writes BC as ``(BC)`` and arrays as ``[...]``), read by psycopg without parsing (the raw text,
and the raw binary bytes), so neither psycopg's loaders nor Python's ``datetime`` can hide a
difference: infinite and BC dates and timestamps, ``24:00:00``, reals and doubles' shortest
digits, ``-0``, NaN, the infinities, intervals in IntervalStyle ``postgres``, arrays with
quoting and NULLs, numerics' scale. Where the two type OIDs differ (DuckDB's ``VARCHAR[]`` is
PostgreSQL's ``varchar[]``, not ``text[]``) only the text is compared.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from conftest import PG_DSN, WireProcess
from psycopg.adapt import Loader
from psycopg.pq import Format

from duckdb_sem.pgwire.oids import OID

pytestmark = pytest.mark.integration

Conn = psycopg.Connection[tuple[Any, ...]]

#: (PostgreSQL's SQL, DuckDB's where it is spelled differently)
CASES: tuple[tuple[str, str | None], ...] = (
    ("'infinity'::date", None),
    ("'-infinity'::date", None),
    ("'0044-03-15 BC'::date", "'0044-03-15 (BC)'::date"),
    ("'0001-01-01'::date", None),
    ("'2024-02-29'::date", None),
    ("'12345-06-07'::date", None),
    ("'infinity'::timestamp", None),
    ("'-infinity'::timestamp", None),
    ("'0044-03-15 12:00:00.25 BC'::timestamp", "'0044-03-15 (BC) 12:00:00.25'::timestamp"),
    ("'2024-01-01 10:00:00.123456'::timestamp", None),
    ("'2024-01-01 10:00:00.5'::timestamp", None),
    ("'12345-01-01 00:00:00'::timestamp", None),
    ("'infinity'::timestamptz", None),
    ("'-infinity'::timestamptz", None),
    ("'2024-01-01 10:00+02'::timestamptz", None),
    ("'0044-03-15 12:00:00+00 BC'::timestamptz", "'0044-03-15 (BC) 12:00:00+00'::timestamptz"),
    ("'24:00:00'::time", None),
    ("'23:59:59.999999'::time", None),
    ("'10:11:12.5'::time", None),
    ("1.1::real", None),
    ("3.4028235e38::real", None),
    ("'-0'::real", None),
    ("1e-5::real", None),
    ("1234567::real", None),
    ("0.1::float8", None),
    ("'-0'::float8", None),
    ("'NaN'::float8", None),
    ("'-Infinity'::float8", None),
    ("1e300::float8", None),
    ("123456789012345678::float8", None),
    ("1e-5::float8", None),
    ("100::float8", None),
    ("0.0000001::numeric(18,10)", "0.0000001::decimal(18,10)"),
    ("1.50::numeric(5,2)", "1.50::decimal(5,2)"),
    ("-1000::numeric(6,0)", "-1000::decimal(6,0)"),
    ("interval '1 year 2 mons 3 days 04:05:06.789'", None),
    ("interval '-14 months' + interval '3 days' - interval '04:05:06'", None),
    ("interval '-1 day' + interval '1 hour'", None),
    ("interval '0 seconds'", None),
    ("interval '100 hours 0.5 seconds'", None),
    ("interval '-1 month'", None),
    ("'{1.5,NaN,Infinity,-0}'::float8[]", "'[1.5, NaN, Infinity, -0]'::float8[]"),
    ("'{1.1,NULL}'::real[]", "[1.1, NULL]::real[]"),
    ("'{1,NULL,3}'::int[]", "[1, NULL, 3]::int[]"),
    ("'{}'::int[]", "[]::int[]"),
    ("'{t,f,NULL}'::bool[]", "[true, false, NULL]::bool[]"),
    ("ARRAY['a b', NULL, '', 'q\"uote', 'NULL', 'x', 'back\\slash', 'tab\tx']::varchar[]", None),
    ("ARRAY['2024-01-01'::date, 'infinity']", None),
    ("ARRAY['2024-01-01 10:00'::timestamp]", None),
    ("ARRAY[interval '1 day', interval '-1 year']", None),
    ("'{{1,2},{3,4}}'::int[]", "[[1, 2], [3, 4]]::int[][]"),
    ("'{1.50,2}'::numeric(4,2)[]", "[1.50, 2]::decimal(4,2)[]"),
    ("'\\x00ff'::bytea", "'\\x00\\xff'::blob"),
    ("ARRAY['\\x00ff'::bytea]", "['\\x00\\xff'::blob]"),
)


class _RawText(Loader):
    format = Format.TEXT

    def load(self, data: Any) -> bytes:
        return bytes(data)


class _RawBinary(Loader):
    format = Format.BINARY

    def load(self, data: Any) -> bytes:
        return bytes(data)


_OIDS = {*OID.values(), 1009, 1015, 1021, 1022, 1182, 1115, 1185, 1187, 1231, 1001}


def _raw(conn: Conn, sql: str, *, binary: bool) -> tuple[int, bytes | None]:
    cur = conn.cursor(binary=binary)
    for oid in _OIDS:
        cur.adapters.register_loader(oid, _RawBinary if binary else _RawText)
    cur.execute(f"SELECT {sql} AS v".encode())
    row = cur.fetchone()
    assert row is not None and cur.description is not None
    return cur.description[0].type_code, row[0]


@pytest.fixture
def both(server: WireProcess, needs_pg: None) -> Iterator[tuple[Conn, Conn]]:
    with (
        psycopg.connect(PG_DSN, autocommit=True) as pg,
        psycopg.connect(server.dsn(), autocommit=True) as ours,
    ):
        pg.execute("SET TimeZone = 'UTC'")
        yield pg, ours


def test_values_go_out_as_postgresql_sends_them(both: tuple[Conn, Conn]) -> None:
    pg, ours = both
    differences = []
    for pg_sql, duck_sql in CASES:
        for binary in (False, True):
            want_oid, want = _raw(pg, pg_sql, binary=binary)
            got_oid, got = _raw(ours, duck_sql or pg_sql, binary=binary)
            if want_oid != got_oid and binary:
                continue  # another type (varchar[] for text[]): its bytes name another OID
            if (want_oid, want) != (got_oid, got) and not (want_oid != got_oid and want == got):
                differences.append((pg_sql, binary, (want_oid, want), (got_oid, got)))
    assert differences == []


def test_timestamptz_in_a_zone_far_from_now(both: tuple[Conn, Conn]) -> None:
    """BC and far-future instants in a named zone: local mean time, then the zone's rule."""
    pg, ours = both
    values = [
        ("'0044-03-15 12:00:00+00 BC'::timestamptz", "'0044-03-15 (BC) 12:00:00+00'::timestamptz"),
        ("'12345-07-01 12:00:00+00'::timestamptz", None),
        ("'1900-01-01 00:00:00+00'::timestamptz", None),
        ("'2024-07-01 12:00:00+00'::timestamptz", None),
    ]
    for conn in (pg, ours):
        conn.execute("SET TimeZone = 'Europe/Berlin'")
    for pg_sql, duck_sql in values:
        assert _raw(ours, duck_sql or pg_sql, binary=False) == _raw(pg, pg_sql, binary=False)
