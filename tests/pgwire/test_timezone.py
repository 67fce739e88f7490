"""``TimeZone`` as in PostgreSQL 15: the same statements, psycopg against both servers.

What is compared is what a client sees: the raw text of timestamptz values (loaded as text, so
psycopg's own parsing cannot hide a difference), ``SHOW TimeZone``, the ``TimeZone`` the server
reports (ParameterStatus, which psycopg uses for the datetimes it builds), binary timestamptz
(the instant, UTC microseconds) and the SQLSTATE of an unknown zone.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from conftest import PG_DSN, WireProcess, make_db, wire_server
from psycopg.types.string import TextLoader

pytestmark = pytest.mark.integration

Conn = psycopg.Connection[tuple[Any, ...]]

VALUES = (
    "'2024-01-01 12:00:00+00'::timestamptz",  # Berlin winter: +01
    "'2024-07-01 12:00:00.5+00'::timestamptz",  # summer +02, a fraction without trailing zeros
    "'2024-01-01 12:00'::timestamptz",  # read in the session's zone
    "'2024-03-31 01:30:00+00'::timestamptz",  # the hour Berlin's clocks go forward
    "'2024-01-01 12:00:00.123456'::timestamp",  # no zone: never shifted
    "'1900-01-01 12:00:00+00'::timestamptz",  # local mean time: offsets in seconds
)
QUERY = "SELECT " + ", ".join(VALUES)
ZONES = ("Europe/Berlin", "Asia/Kolkata", "America/St_Johns", "Europe/Amsterdam", "UTC",
         "europe/berlin", "UTC+3", "GMT-02:00", "-7", "+05")  # fmt: skip


def _texts(conn: Conn, sql: str) -> tuple[Any, ...]:
    cur = conn.cursor()
    cur.adapters.register_loader("timestamptz", TextLoader)
    cur.adapters.register_loader("timestamp", TextLoader)
    cur.execute(sql.encode())
    row = cur.fetchone()
    assert row is not None
    return tuple(row)


def _session(conn: Conn, zone: str) -> tuple[object, ...]:
    conn.execute(f"SET TimeZone = '{zone}'".encode())
    shown = conn.execute(b"SHOW TimeZone")
    return (
        shown.fetchall(),
        [d.name for d in shown.description or ()],
        conn.info.parameter_status("TimeZone"),
        _texts(conn, QUERY),
        _texts(conn, "SELECT '2024-05-05 10:00:00+00'::timestamptz + INTERVAL '1 day'"),
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WireProcess]:
    """One wire server for the module, not one per test (their starts were most of its time):
    a session's ``TimeZone`` is its own (``test_set_global_timezone_is_refused``), so the tests
    cannot see each other's."""
    db = make_db(tmp_path_factory.mktemp("timezone") / "sem.duckdb")
    with wire_server(db, "--backend", "test:?yes_if=good") as proc:
        yield proc


@pytest.fixture
def both(server: WireProcess, needs_pg: None) -> Iterator[tuple[Conn, Conn]]:
    with (
        psycopg.connect(PG_DSN, autocommit=True) as pg,
        psycopg.connect(server.dsn(), autocommit=True) as ours,
    ):
        yield pg, ours


@pytest.mark.parametrize("zone", ZONES)
def test_set_timezone_renders_as_postgresql(both: tuple[Conn, Conn], zone: str) -> None:
    pg, ours = both
    expected = _session(pg, zone)
    assert _session(ours, zone) == expected
    if zone == "Europe/Berlin":  # the case, spelled out
        assert expected[3][0] == "2024-01-01 13:00:00+01"
        assert expected[3][1] == "2024-07-01 14:00:00.5+02"


def test_set_time_zone_forms_and_errors(both: tuple[Conn, Conn]) -> None:
    pg, ours = both
    for conn in (pg, ours):
        conn.execute(b"SET TIME ZONE -7")
        assert conn.execute(b"SHOW TimeZone").fetchall() == [("<-07>+07",)]
        conn.execute(b"SET TIME ZONE 'Asia/Tokyo'")
        assert conn.execute(b"SHOW TimeZone").fetchall() == [("Asia/Tokyo",)]
        assert _texts(conn, VALUES[0].join(("SELECT ", ""))) == ("2024-01-01 21:00:00+09",)
        with pytest.raises(psycopg.Error) as caught:
            conn.execute(b"SET TimeZone = 'Mars/Olympus_Mons'")
        assert caught.value.sqlstate == "22023"
        assert 'invalid value for parameter "TimeZone": "Mars/Olympus_Mons"' in str(caught.value)
        assert conn.execute(b"SHOW TimeZone").fetchall() == [("Asia/Tokyo",)]
        # the datetimes psycopg builds follow the reported zone, on both
        value = conn.execute(b"SELECT '2024-01-01 12:00:00+00'::timestamptz").fetchone()
        assert value is not None and value[0].utcoffset() == dt.timedelta(hours=9)
        # binary results carry the instant (UTC microseconds), whatever the zone
        binary = conn.cursor(binary=True)
        binary.execute(b"SELECT '2024-01-01 12:00:00+00'::timestamptz")
        row = binary.fetchone()
        assert row is not None and row[0] == dt.datetime(2024, 1, 1, 12, tzinfo=dt.UTC)
        conn.execute(b"RESET TimeZone")  # the server's default zone (PostgreSQL's: Etc/UTC)
        assert _texts(conn, VALUES[0].join(("SELECT ", ""))) == ("2024-01-01 12:00:00+00",)


def test_startup_timezone_as_postgresql(server: WireProcess, needs_pg: None) -> None:
    options = "-c TimeZone=America/New_York"
    seen = []
    for dsn in (PG_DSN, server.dsn()):
        with psycopg.connect(dsn, autocommit=True, options=options) as conn:
            seen.append(
                (
                    conn.info.parameter_status("TimeZone"),
                    conn.execute(b"SHOW TimeZone").fetchall(),
                    conn.execute(b"SELECT current_setting('TimeZone')").fetchall(),
                    _texts(conn, QUERY),
                )
            )
    assert seen[0] == seen[1]
    assert seen[1][0] == "America/New_York"


def test_set_global_timezone_is_refused(server: WireProcess) -> None:
    """Only the session's own zone changes: DuckDB's global default stays every session's."""
    with (
        psycopg.connect(server.dsn(), autocommit=True) as one,
        psycopg.connect(server.dsn(), autocommit=True) as other,
    ):
        for sql in ("SET GLOBAL TimeZone = 'Asia/Tokyo'", "PRAGMA TimeZone = 'Asia/Tokyo'"):
            with pytest.raises(psycopg.Error) as caught:
                one.execute(sql.encode())
            assert caught.value.sqlstate == "42501", sql
        one.execute(b"SET TimeZone = 'Asia/Tokyo'")
        assert _texts(other, VALUES[0].join(("SELECT ", ""))) == ("2024-01-01 12:00:00+00",)
        assert _texts(one, VALUES[0].join(("SELECT ", ""))) == ("2024-01-01 21:00:00+09",)


def test_semantic_queries_follow_the_session_zone(server: WireProcess) -> None:
    """A planned semantic query reads and renders timestamptz in the session's zone too."""
    stamp = "TIMESTAMPTZ '2024-01-01 23:30:00+00' + id * INTERVAL '1 hour'"
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        conn.execute(b"SET TimeZone = 'Europe/Berlin'")
        semantic = _texts(
            conn,
            f"SELECT list({stamp} ORDER BY id)::VARCHAR, list(hour({stamp}) ORDER BY id)::VARCHAR, "
            f"max({stamp}) FROM reviews WHERE sem_filter('Is it positive? {{text}}')",
        )
        plain = _texts(
            conn,
            f"SELECT list({stamp} ORDER BY id)::VARCHAR, list(hour({stamp}) ORDER BY id)::VARCHAR, "
            f"max({stamp}) FROM reviews WHERE id IN (1, 3)",
        )
        explained = conn.execute(
            f"EXPLAIN SEMANTIC VERBOSE SELECT id FROM (SELECT id, text, {stamp} AS ts FROM "
            "reviews) WHERE sem_filter('At {ts}: {text}')".encode()
        ).fetchall()
    assert semantic == plain
    assert plain[2] == "2024-01-02 03:30:00+01" and plain[1] == "[1, 3]"
    # the prompt renders the value in the session's zone too
    assert "At 2024-01-02 01:30:00+01" in "\n".join(row[0] for row in explained)
