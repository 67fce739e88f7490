"""Bound parameters as PostgreSQL 15 reads them: each type psycopg sends, in text and binary.

For each value, psycopg sends it the default way (``%s``), as text (``%t``) and as binary
(``%b``) to PostgreSQL 15 on this machine and to the wire server, on the plain road and
through a ``sem_filter`` (the planner's road, parameters written as literals). What psycopg
reads back, with its Python type, must be the same. Pairs that differ for a reason
docs/pgwire.md gives are strict xfails, so a fix shows up.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import struct
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from conftest import PG_DSN, make_db, pg_available, wire_server
from psycopg.types.json import Json, Jsonb

from duckdb_sem.errors import ParameterError
from duckdb_sem.pgwire.oids import OID
from duckdb_sem.pgwire.params import decode_param

pytestmark = pytest.mark.integration

_D = decimal.Decimal
_PLUS2 = dt.timezone(dt.timedelta(hours=2))
#: (name, value, PostgreSQL type for the typed form)
CASES: list[tuple[str, Any, str]] = [
    ("int2", 7, "int2"),
    ("int4", 70_000, "int4"),
    ("int8", 2**40, "int8"),
    ("int_2_63", 2**63, "numeric"),
    ("int_neg_big", -(2**63) - 1, "numeric"),
    ("int_10_30", 10**30, "numeric"),
    ("numeric", _D("1.50"), "numeric"),
    ("numeric_exp", _D("-1E+3"), "numeric"),
    ("numeric_nan", _D("NaN"), "numeric"),
    ("numeric_inf", _D("Infinity"), "numeric"),
    ("float8", 1.5, "float8"),
    ("float_neg_zero", -0.0, "float8"),
    ("float_nan", float("nan"), "float8"),
    ("float_inf", float("-inf"), "float8"),
    ("float4", 1.5, "float4"),
    ("bool", True, "bool"),
    ("text", "it's ü", "text"),
    ("bytea", b"\x00\xff'\\", "bytea"),
    ("uuid", uuid.UUID(int=12345), "uuid"),
    ("date", dt.date(2024, 2, 29), "date"),
    ("time", dt.time(1, 2, 3, 4), "time"),
    ("timetz", dt.time(1, 2, 3, tzinfo=_PLUS2), "timetz"),
    ("timestamp", dt.datetime(2024, 1, 2, 3, 4, 5, 6), "timestamp"),
    ("timestamptz", dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=_PLUS2), "timestamptz"),
    ("interval", dt.timedelta(days=-1, seconds=5, microseconds=7), "interval"),
    ("json", Json({"a": [1, None]}), "json"),
    ("jsonb", Jsonb({"a": 1}), "jsonb"),
    ("int_array", [1, 2, None], "int[]"),
    ("text_array", ["a b", None, '"q"', "NULL"], "text[]"),
    ("nested_array", [[1, 2], [3, 4]], "int[]"),
]
#: (case, typed?) pairs that differ for a reason docs/pgwire.md lists: (formats, None: all; why)
KNOWN: dict[tuple[str, bool], tuple[str | None, str]] = {
    **{
        (n, True): (None, "DuckDB's NUMERIC is DECIMAL(18,3)")
        for n in ("int_2_63", "int_neg_big", "int_10_30", "numeric", "numeric_exp")
    },
    **{
        (n, typed): (None, "DECIMAL has no NaN or infinity: DOUBLE")
        for n in ("numeric_nan", "numeric_inf")
        for typed in (True, False)
    },
    **{
        (n, typed): (None, "uuid, json and timetz results go out as text and time")
        for n in ("uuid", "json", "jsonb", "timetz")
        for typed in (True, False)
    },
    ("text_array", True): ("st", "a text list is sent untyped: DuckDB's cast reads '{...}' itself"),
    ("nested_array", True): (None, "DuckDB's INTEGER[] has one dimension"),
}
FORMATS = {"default": "s", "text": "t", "binary": "b"}
_SEMANTIC = " AS v FROM reviews WHERE sem_filter('{text} is good') ORDER BY id LIMIT 1"
_PG_ONE_ROW = " AS v FROM (VALUES (1)) AS t(id)"


def _key(value: Any) -> tuple[str, Any]:
    """What must match: the Python type and the value (``-0.0`` and NaN by their repr)."""
    if isinstance(value, float | decimal.Decimal):
        return type(value).__name__, repr(value)
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return "datetime+tz", value.astimezone(dt.UTC)
    return type(value).__name__, value


def _read(conn: psycopg.Connection[Any], sql: str, value: Any) -> tuple[str, Any]:
    try:
        row = conn.execute(sql.encode(), [value]).fetchone()
    except psycopg.Error as err:
        return "error", err.sqlstate
    assert row is not None
    return _key(row[0])


@pytest.fixture(scope="module")
def conns(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any]]:
    if not pg_available():
        pytest.skip("no PostgreSQL on 127.0.0.1:5432 (.ci/run starts one)")
    db = make_db(tmp_path_factory.mktemp("params") / "sem.duckdb")
    with (
        wire_server(db, "--backend", "test:?yes_if=good") as proc,
        psycopg.connect(PG_DSN, autocommit=True) as pg,
        psycopg.connect(proc.dsn(), autocommit=True) as wire,
    ):
        yield pg, wire


@pytest.mark.parametrize("typed", [False, True], ids=["untyped", "typed"])
@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize(("name", "value", "pg_type"), CASES, ids=[c[0] for c in CASES])
def test_parameter_reads_as_postgresql_reads_it(
    conns: tuple[Any, Any],
    request: pytest.FixtureRequest,
    name: str,
    value: Any,
    pg_type: str,
    fmt: str,
    typed: bool,
) -> None:
    known = KNOWN.get((name, typed))
    if known is not None and (known[0] is None or FORMATS[fmt] in known[0]):
        request.applymarker(pytest.mark.xfail(strict=True, reason=known[1]))
    pg, wire = conns
    select = f"SELECT %{FORMATS[fmt]}" + (f"::{pg_type}" if typed else "")
    expected = _read(pg, select + _PG_ONE_ROW, value)
    assert expected[0] != "error"
    assert _read(wire, select, value) == expected, "plain road"
    assert _read(wire, select + _SEMANTIC, value) == expected, "semantic road"


# -- the decoders alone, against psycopg's own dumpers --------------------------------------
def test_binary_decoders_read_what_psycopg_loads() -> None:
    """Each binary format, dumped by psycopg and read by psycopg's loader and by the server's
    decoder (no server): the same value."""
    tx = psycopg.adapt.Transformer()
    for _, value, _ in CASES:
        dumper = tx.get_dumper(value, psycopg.adapt.PyFormat.BINARY)
        data = dumper.dump(value)
        assert data is not None
        want = tx.get_loader(dumper.oid, psycopg.pq.Format.BINARY).load(data)
        got = decode_param(bytes(data), dumper.oid, binary=True)
        got = getattr(got, "object", got)  # a typed duckdb.Value, or a numeric's Decimal
        if dumper.oid in {OID["json"], OID["jsonb"]}:
            got = json.loads(got)
        if isinstance(want, decimal.Decimal) and not want.is_finite():
            want = float(want)  # DECIMAL has no NaN or infinity: sent to DuckDB as DOUBLE
        assert _key(got) == _key(want), (dumper.oid, bytes(data))


def test_binary_infinity_and_months_reach_duckdb_as_text_it_casts() -> None:
    assert decode_param(struct.pack("!q", 2**63 - 1), OID["timestamp"], binary=True).object == (
        "infinity"
    )
    months = decode_param(struct.pack("!qii", 5, 2, 14), OID["interval"], binary=True)
    assert months.object == "14 months 2 days 5 microseconds"


@pytest.mark.parametrize(
    ("data", "oid", "binary", "sqlstate"),
    [
        (b"maybe", OID["bool"], False, "22P02"),
        (b"\x00\x01", OID["int4"], True, "22P03"),
        (b"\xff\xfe", OID["text"], True, "22021"),
        (b"\\xzz", OID["bytea"], False, "22P02"),
        (b"{1,2", OID["_int4"], False, "22P02"),
    ],
)
def test_invalid_parameters_fail_with_postgresql_sqlstates(
    data: bytes, oid: int, binary: bool, sqlstate: str
) -> None:
    with pytest.raises(ParameterError) as caught:
        decode_param(data, oid, binary=binary)
    assert caught.value.sqlstate == sqlstate
