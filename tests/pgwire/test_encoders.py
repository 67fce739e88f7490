"""The result encoders without a server: Arrow columns of every unit to PostgreSQL's bytes.

What PostgreSQL 15 itself sends is compared in ``test_wire_types.py`` (it needs a PostgreSQL);
these pin the Arrow side, which DuckDB alone produces: units other than microseconds, values
Python's ``datetime`` cannot hold, NULLs inside lists, and what no PostgreSQL array can be.
"""

from __future__ import annotations

import struct

import duckdb
import pyarrow as pa
import pytest

from duckdb_sem.errors import UnsendableValueError
from duckdb_sem.pgwire.types import pg_type_for


def _column(sql: str, zone: str = "UTC") -> pa.Array:
    con = duckdb.connect()
    con.execute(f"SET TimeZone = '{zone}'")
    return con.sql(sql).to_arrow_table().column(0).combine_chunks()


def _out(sql: str, *, zone: str = "UTC") -> list[tuple[bytes | None, bytes | None]]:
    column = _column(sql, zone)
    kind = pg_type_for(column.type)
    return [
        (None, None) if v is None else (kind.text(v), kind.binary(v)) for v in kind.values(column)
    ]


def test_values_datetime_cannot_hold() -> None:
    texts = [t for t, _ in _out(
        "SELECT unnest(['infinity', '-infinity', '0044-03-15 (BC)', '12345-06-07', NULL]::date[])"
    )]  # fmt: skip
    assert texts == [b"infinity", b"-infinity", b"0044-03-15 BC", b"12345-06-07", None]
    assert _out("SELECT '24:00:00'::time") == [(b"24:00:00", struct.pack("!q", 86_400_000_000))]
    assert _out("SELECT 'infinity'::date")[0][1] == struct.pack("!i", 2**31 - 1)
    assert _out("SELECT '-infinity'::timestamp")[0][1] == struct.pack("!q", -(2**63))


@pytest.mark.parametrize("unit", ["timestamp_s", "timestamp_ms", "timestamp", "timestamp_ns"])
def test_every_timestamp_unit_is_microseconds(unit: str) -> None:
    (text, binary), = _out(f"SELECT '2000-01-02 03:04:05'::{unit}")  # fmt: skip
    assert text == b"2000-01-02 03:04:05"
    assert binary == struct.pack("!q", (86_400 + 3 * 3600 + 4 * 60 + 5) * 1_000_000)


def test_timestamptz_in_the_column_zone_far_from_now() -> None:
    rows = _out(
        "SELECT unnest(['2024-01-01 12:00+00', '0044-03-15 (BC) 12:00+00', "
        "'12345-07-01 12:00+00']::timestamptz[])",
        zone="Europe/Berlin",
    )
    assert [t for t, _ in rows] == [
        b"2024-01-01 13:00:00+01",
        b"0044-03-15 12:53:28+00:53:28 BC",  # local mean time before 1893
        b"12345-07-01 14:00:00+02",  # the zone's summer rule, repeated
    ]


def test_arrow_units_duckdb_does_not_make() -> None:
    for array, text in (
        (pa.array([86_400_000], pa.date64()), b"1970-01-02"),
        (pa.array([3_600_000], pa.time32("ms")), b"01:00:00"),
        (pa.array([-1_500_000], pa.duration("us")), b"-00:00:01.5"),
        (pa.array([[1.5, None]], pa.large_list(pa.float32())), b"{1.5,NULL}"),
    ):
        kind = pg_type_for(array.type)
        assert [kind.text(v) for v in kind.values(array)] == [text]


def test_nested_lists_are_arrays_of_their_dimensions() -> None:
    ((text, binary),) = _out("SELECT [[1, 2], [3, NULL]]")
    assert text == b"{{1,2},{3,NULL}}"
    assert binary[:28] == struct.pack("!iiiiiii", 2, 1, 23, 2, 1, 2, 1)
    ((text, binary),) = _out("SELECT []::int[][]")
    assert (text, binary) == (b"{}", struct.pack("!iii", 0, 0, 23))
    ragged = _column("SELECT [[1], [2, 3]]")
    kind = pg_type_for(ragged.type)
    (value,) = kind.values(ragged)
    assert kind.text(value) == b"{{1},{2,3}}"
    with pytest.raises(UnsendableValueError, match=r"different lengths.*text format"):
        kind.binary(value)


def test_array_elements_quoted_as_array_out_quotes_them() -> None:
    ((text, _),) = _out(
        "SELECT ['a b', NULL, '', 'NULL', 'null', 'x', 'q\"', 'b\\s', 't' || chr(9), 'é']"
    )
    assert text == '{"a b",NULL,"","NULL","null",x,"q\\"","b\\\\s","t\t",é}'.encode()
