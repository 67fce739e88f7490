"""Every type family of PostgreSQL 15 read as a source, compared row by row with psql's output.

One table in a fresh schema of the real PostgreSQL holds a column per type family with its edge
values (infinite dates and timestamps, BC, NaN, -0, 24:00, padded char(n), empty bytea,
arrays with NULL elements, an enum, domains). It is read in process and through the wire
server, and each field is compared with what ``psql -At`` prints for it on PostgreSQL; the
in-process values are printed as PostgreSQL prints them (``pg_text``), the wire server's are
compared as psql prints them. The differences that remain are listed here and in
docs/pgwire.md, each with its reason.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import psycopg.adapt
import psycopg.pq
import pytest
from pg_text import NULL, pg_rows

import duckdb_sem
from duckdb_sem.errors import PlanError
from duckdb_sem.pg import attach_postgres

pytestmark = pytest.mark.integration

DSN = "host=127.0.0.1 port=5432 user=postgres dbname=test"

SETUP = """
CREATE TYPE {s}.mood AS ENUM ('sad', 'ok', 'happy');
CREATE DOMAIN {s}.posint AS integer CHECK (VALUE > 0);
CREATE DOMAIN {s}.price AS numeric(8,3);
CREATE TABLE {s}.types (
  id int, i2 int2, i4 int4, i8 int8, n numeric, n102 numeric(10,2), f4 real, f8 float8,
  b bool, t text, vc varchar(5), c char(5), ba bytea, u uuid, d date, tm time, ttz timetz,
  ts timestamp, ts3 timestamp(3), tstz timestamptz, iv interval, j json, jb jsonb,
  ia int[], ta text[], e {s}.mood, dom {s}.posint, pr {s}.price, ip inet, cd cidr,
  mac macaddr, m money, p point, x xml, tv tsvector, fa float8[], bla bool[], na numeric[]);
INSERT INTO {s}.types VALUES
 (1, -32768, -2147483648, 9223372036854775807,
  123456789012345678901234567890.123456789012345678901234567890, 12345678.91, 1.1, 0.1, true,
  'héllo', 'abc', 'ab', '\\x00ff10', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '2024-02-29',
  '24:00:00', '10:11:12.5+05:30', '2024-01-01 10:00:00.123456', '2024-01-01 10:00:00.123',
  '2024-01-01 10:00+02', '1 year 2 mons 3 days 04:05:06.789', '{{"a": [1, null], "b":  "x"}}',
  '{{"b": 1, "a": [1, null]}}', '{{1,NULL,3}}', '{{"a b",NULL,"","q\\"uote","NULL",x}}',
  'happy', 7, 1.5, '192.168.0.1/24', '10.0.0.0/8', '08:00:2b:01:02:03', 1234.56, '(1.5,2)',
  '<a>x</a>', 'a fat cat', '{{1.5,NaN,Infinity,-0}}', '{{t,f,NULL}}', '{{1.50,NaN}}'),
 (2, 0, 0, 0, 'NaN', 'NaN', 'NaN', 'Infinity', false, '', '', '', '',
  '00000000-0000-0000-0000-000000000000', 'infinity', '00:00:00', '00:00:00-08', 'infinity',
  '-infinity', 'infinity', '-1 year -2 mons +3 days -04:05:06', 'null', '[]', '{{}}', '{{}}',
  'sad', 1, 0, '::1', '::/0', '00:00:00:00:00:00', -0.5, '(0,0)', '', '', '{{}}', '{{}}', '{{}}'),
 (3, 1, 1, -1, 'Infinity', -0.5, '-Infinity', '-0', NULL, 'multi word  ', 'a', 'x y', '\\x',
  NULL, '-infinity', '23:59:59.999999', NULL, '-infinity', NULL, '-infinity', '1 day -1 hour',
  '"s"', '"s"', '{{NULL}}', '{{NULL}}', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
  NULL, NULL, NULL, NULL),
 (4, NULL, NULL, NULL, '-Infinity', NULL, 3.4028235e38, 1e300, NULL, NULL, NULL, NULL, NULL,
  NULL, '0044-03-15 BC', NULL, NULL, '0044-03-15 12:00:00 BC', NULL, '1900-06-01 00:00+00',
  '-1 days +01:00:00', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
  NULL, NULL, NULL, NULL, NULL),
 (5, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
  NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
  NULL, NULL, NULL, NULL, NULL, NULL, NULL);
"""

#: The rest of PostgreSQL 15's built-in types, each arriving as the text psql prints.
MORE = """
CREATE TABLE {s}.more AS SELECT 1 AS id, int4range(1, 5) AS r4, '[2024-01-01,infinity)'::daterange AS dr,
  tstzrange('2024-01-01 00:00+00', NULL) AS tr, B'101'::bit(3) AS bt, B'1'::varbit AS vb, 'x'::"char" AS ch,
  'nm'::name AS nm, 12345::oid AS o, interval '1-2' year to month AS ym, '10:11:12.345'::time(2) AS t2,
  '2024-01-01 10:00:00.5'::timestamp(0) AS t0, 'fat & rat'::tsquery AS tq, '{{1,2,3}}'::line AS ln,
  '((0,0),(1,1))'::lseg AS ls, '((0,0),(1,1))'::box AS bx, '((0,0),(1,1),(2,0))'::path AS pa,
  '((0,0),(1,1),(2,0))'::polygon AS pg, '<(0,0),1>'::circle AS ci, '16/B374D848'::pg_lsn AS lsn,
  'pg_class'::regclass AS rc, '$.a'::jsonpath AS jp, '08:00:2b:01:02:03:04:05'::macaddr8 AS m8,
  '1 2'::int2vector AS iv2, ARRAY['ok'::{s}.mood] AS ea,
  '[0:1]={{1,2}}'::numeric[] AS nb, ARRAY['2024-01-01'::date, 'infinity'] AS da
"""

#: The DuckDB type each column arrives as (docs/pgwire.md: what arrives as text, and why).
DUCK_TYPES = {
    "id": "INTEGER", "i2": "SMALLINT", "i4": "INTEGER", "i8": "BIGINT", "n": "VARCHAR",
    "n102": "DECIMAL(10,2)", "f4": "FLOAT", "f8": "DOUBLE", "b": "BOOLEAN", "t": "VARCHAR",
    "vc": "VARCHAR", "c": "VARCHAR", "ba": "BLOB", "u": "VARCHAR", "d": "DATE", "tm": "TIME",
    "ttz": "VARCHAR", "ts": "TIMESTAMP", "ts3": "TIMESTAMP", "tstz": "TIMESTAMP WITH TIME ZONE",
    "iv": "INTERVAL", "j": "VARCHAR", "jb": "VARCHAR", "ia": "INTEGER[]", "ta": "VARCHAR[]",
    "e": "VARCHAR", "dom": "INTEGER", "pr": "DECIMAL(8,3)", "ip": "VARCHAR", "cd": "VARCHAR",
    "mac": "VARCHAR", "m": "VARCHAR", "p": "VARCHAR", "x": "VARCHAR", "tv": "VARCHAR",
    "fa": "DOUBLE[]", "bla": "BOOLEAN[]", "na": "VARCHAR",
}  # fmt: skip
COLUMNS = list(DUCK_TYPES)

#: (column, psql's text, ours) left after the normalisation, each listed in docs/pgwire.md:
#: DECIMAL has no NaN, so a constrained numeric's NaN is NULL.
IN_PROCESS_DIFFERENCES = {("n102", "NaN", NULL)}


def _psql(
    sql: str, *, port: int = 5432, user: str = "postgres", db: str = "test", width: int = 0
) -> list[tuple[str, ...]]:
    done = subprocess.run(
        ["psql", "-X", "-At", "-F", "|", "-P", f"null={NULL}", "-h", "127.0.0.1",
         "-p", str(port), "-U", user, "-d", db, "-c", sql],
        capture_output=True, text=True, timeout=60, env={**os.environ, "PGTZ": "UTC"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = done.stdout
    rows = [tuple(line.split("|")) for line in out.splitlines()]
    assert all(len(r) == (width or len(COLUMNS)) for r in rows), out  # no value holds the "|"
    return rows


def _differences(
    expected: list[tuple[str, ...]], got: list[tuple[str, ...]]
) -> set[tuple[str, str, str]]:
    assert len(expected) == len(got)
    return {
        (name, want, have)
        for want_row, got_row in zip(expected, got, strict=True)
        for name, want, have in zip(COLUMNS, want_row, got_row, strict=True)
        if want != have
    }


@pytest.fixture
def schema() -> Iterator[str]:
    try:
        socket.create_connection(("127.0.0.1", 5432), timeout=1).close()
    except OSError:
        pytest.skip("no PostgreSQL on 127.0.0.1:5432")
    name = f"dsem_types_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {name}")
        try:
            conn.execute(SETUP.format(s=name))  # type: ignore[arg-type]
            yield name
        finally:
            conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")


def _select(table: str) -> str:
    return f"SELECT {', '.join(COLUMNS)} FROM {table} ORDER BY id"


def test_every_type_reads_as_psql_prints_it(schema: str) -> None:
    expected = _psql(_select(f"{schema}.types"))
    assert len(expected) == 5
    with duckdb_sem.connect(backend="test:", cache="off") as con:
        source = attach_postgres(con.duckdb, DSN, alias="pg")
        described = con.duckdb.execute(
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE table_catalog = 'pg' AND table_name = 'types' ORDER BY ordinal_position"
        ).fetchall()
        table = con.sql(source.rewrite(_select(f"pg.{schema}.types"), con.duckdb)).to_arrow_table()
    assert _differences(expected, pg_rows(table)) == IN_PROCESS_DIFFERENCES
    assert dict(described) == DUCK_TYPES  # the catalog's columns are the scan's


def test_the_other_types_read_as_psql_prints_them(schema: str) -> None:
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(MORE.format(s=schema))  # type: ignore[arg-type]
        names = [r[0] for r in conn.execute(f"SELECT * FROM {schema}.more LIMIT 0").description]
    sql = f"SELECT {', '.join(names)} FROM {{}}.more"
    expected = _psql(sql.format(schema), width=len(names))
    with duckdb_sem.connect(backend="test:", cache="off") as con:
        source = attach_postgres(con.duckdb, DSN, alias="pg")
        table = con.sql(source.rewrite(sql.format(f"pg.{schema}"), con.duckdb)).to_arrow_table()
    assert dict(zip(table.column_names, map(str, table.schema.types), strict=True)) == {
        **dict.fromkeys(names, "string"),
        "id": "int32", "o": "int64", "ym": "month_day_nano_interval", "t2": "time64[us]",
        "t0": "timestamp[us]",
    }  # fmt: skip
    assert pg_rows(table) == expected


def test_a_semantic_query_over_every_type(schema: str) -> None:
    """Odd-typed columns ride along a sem_filter, and can be template fields."""
    plain = f"SELECT {', '.join(COLUMNS)} FROM pg.{schema}.types"
    with duckdb_sem.connect(backend="test:?yes_if=héllo", cache="off") as con:
        source = attach_postgres(con.duckdb, DSN, alias="pg")
        everything = con.sql(source.rewrite(plain + " ORDER BY id", con.duckdb)).to_arrow_table()
        sql = f"{plain} WHERE sem_filter('is {{t}} a greeting?') ORDER BY id"
        kept = con.sql(source.rewrite(sql, con.duckdb)).to_arrow_table()
        odd = (
            f"SELECT id FROM pg.{schema}.types WHERE sem_filter("
            "'{t} {ba} {d} {ts} {tstz} {iv} {ia} {ta} {n} {tm} {dom} {p}') ORDER BY id"
        )
        ids = con.sql(source.rewrite(odd, con.duckdb)).fetchall()
    assert pg_rows(kept) == pg_rows(everything)[:1]
    assert ids == [(1,)]


def test_a_table_created_after_the_attach_is_read(schema: str) -> None:
    with duckdb_sem.connect(backend="test:", cache="off") as con:
        source = attach_postgres(con.duckdb, DSN, alias="pg")
        with psycopg.connect(DSN, autocommit=True) as conn:
            conn.execute(f"CREATE TABLE {schema}.later (id int, note char(3))")
            conn.execute(f"INSERT INTO {schema}.later VALUES (1, 'a'), (2, NULL)")
        sql = f"SELECT id, note FROM pg.{schema}.later ORDER BY id"
        assert con.sql(source.rewrite(sql, con.duckdb)).fetchall() == [(1, "a  "), (2, None)]
        # An unknown table still fails as DuckDB reports it, after one more catalog read.
        with pytest.raises(duckdb.CatalogException, match="nothere"):
            con.sql(source.rewrite(f"SELECT * FROM pg.{schema}.nothere", con.duckdb))
        # Altered and dropped: each statement reads the table's catalog rows again.
        with psycopg.connect(DSN, autocommit=True) as conn:
            conn.execute(f"ALTER TABLE {schema}.later ADD COLUMN at date DEFAULT 'infinity'")
        sql = f"SELECT id, at FROM pg.{schema}.later ORDER BY id"
        later = con.sql(source.rewrite(sql, con.duckdb)).to_arrow_table()
        assert pg_rows(later) == [("1", "infinity"), ("2", "infinity")]
        with psycopg.connect(DSN, autocommit=True) as conn:
            conn.execute(f"DROP TABLE {schema}.types")
        with pytest.raises(PlanError, match=r"types no longer exists in PostgreSQL"):
            con.sql(source.rewrite(f"SELECT * FROM pg.{schema}.types", con.duckdb))


def test_no_rows_keep_the_types_and_a_2d_array_says_what_to_do(schema: str) -> None:
    with duckdb_sem.connect(backend="test:", cache="off") as con:
        source = attach_postgres(con.duckdb, DSN, alias="pg")
        sql = f"SELECT ba, iv, ia, d, n102 FROM pg.{schema}.types WHERE id = 99"
        empty = con.sql(source.rewrite(sql, con.duckdb)).to_arrow_table()
        assert empty.num_rows == 0
        assert [str(t) for t in empty.schema.types] == [
            "binary", "month_day_nano_interval", "list<l: int32>", "date32[day]",
            "decimal128(10, 2)",
        ]  # fmt: skip
        with psycopg.connect(DSN, autocommit=True) as conn:
            conn.execute(
                f"INSERT INTO {schema}.types (id, ia, ta) VALUES (6, '{{{{1,2}},{{3,4}}}}', NULL), "
                "(7, NULL, '{{a,b},{c,d}}')"
            )
        for column in ("ia", "ta"):
            with pytest.raises(PlanError, match=r"multi-dimensional array.*::text"):
                con.sql(source.rewrite(f"SELECT {column} FROM pg.{schema}.types", con.duckdb))
        with psycopg.connect(DSN, autocommit=True) as conn:
            conn.execute(f"INSERT INTO {schema}.types (id, ts) VALUES (8, '294270-01-01')")
        with pytest.raises(PlanError, match=r"after 294247 AD does not fit DuckDB.*::text"):
            con.sql(source.rewrite(f"SELECT ts FROM pg.{schema}.types", con.duckdb))


@pytest.fixture
def wire(tmp_path: Path) -> Iterator[tuple[int, str]]:
    """A ``duckdb-sem pgwire`` process with PostgreSQL attached as ``pg``: (port, dbname)."""
    from processes import stop

    db = tmp_path / "wire.duckdb"
    duckdb.connect(str(db)).close()
    command = [
        sys.executable, "-c", "from duckdb_sem.cli.main import main; main()", "pgwire",
        "--db", str(db), "--listen", "127.0.0.1:0", "--cache", "off",
        "--backend", "test:?yes_if=héllo", "--postgres", f"pg={DSN}",
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert process.stderr is not None
        port = 0
        while not port:
            line = process.stderr.readline().decode(errors="replace")
            if not line:
                raise RuntimeError(f"pgwire exited with {process.wait()} before listening")
            found = re.search(r"listening on [^ ]*:(\d+) ", line)
            port = int(found.group(1)) if found else 0
        yield port, db.stem
    finally:
        stop(process)


#: (column, psql on PostgreSQL, psql on the wire server) that remain: only the in-process ones
#: (the wire server prints what it reads as PostgreSQL prints it, infinite and BC dates too).
WIRE_DIFFERENCES = IN_PROCESS_DIFFERENCES
#: Columns whose binary form must be PostgreSQL's byte for byte (the others arrive as another
#: type: numeric past 38 digits, uuid, json and the rest are text; text[] is varchar[]).
BINARY_SAME = ("id", "i2", "i4", "i8", "f4", "f8", "b", "t", "vc", "c", "ba", "d", "tm", "ts",
               "ts3", "tstz", "iv", "ia", "dom", "fa", "bla")  # fmt: skip


class _RawBinary(psycopg.adapt.Loader):
    format = psycopg.pq.Format.BINARY

    def load(self, data: Any) -> bytes:
        return bytes(data)


def _binary_rows(dsn: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET TimeZone = 'UTC'")
        cur = conn.cursor(binary=True)
        cur.execute(sql + " LIMIT 0")
        for column in cur.description or ():
            cur.adapters.register_loader(column.type_code, _RawBinary)
        cur.execute(sql)
        return [tuple(row) for row in cur.fetchall()]


def test_every_type_through_the_wire_server(schema: str, wire: tuple[int, str]) -> None:
    port, dbname = wire
    wire_dsn = f"host=127.0.0.1 port={port} user=t dbname={dbname}"
    expected = _psql(_select(f"{schema}.types"))
    got = _psql(_select(f"pg.{schema}.types"), port=port, user="t", db=dbname)
    assert _differences(expected, got) == WIRE_DIFFERENCES
    binary = f"SELECT {', '.join(BINARY_SAME)} FROM {{}}.types ORDER BY id"
    want = _binary_rows(DSN, binary.format(schema))
    assert _binary_rows(wire_dsn, binary.format(f"pg.{schema}")) == want
    # Created after the server started: visible without a restart.
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {schema}.later AS SELECT 7 AS id, 'x'::char(2) AS c")
    with psycopg.connect(wire_dsn, autocommit=True) as wire_conn:
        rows = wire_conn.execute(f"SELECT id, c FROM pg.{schema}.later").fetchall()
        loadable = ", ".join(c for c in COLUMNS if c != "tm")  # psycopg's time has no 24:00
        kept = wire_conn.execute(
            f"SELECT {loadable} FROM pg.{schema}.types WHERE sem_filter('is {{t}} a greeting?')"
        ).fetchall()
    assert rows == [(7, "x ")]
    assert [row[0] for row in kept] == [1]


def _listings(port: int, dbname: str, schema: str) -> tuple[list[str], list[tuple[str, ...]]]:
    """psql's ``\\dt`` of the source's schema, and its tables in ``information_schema``."""
    listed = subprocess.run(
        ["psql", "-X", "-At", "-h", "127.0.0.1", "-p", str(port), "-U", "t", "-d", dbname,
         "-c", r"\dt"],
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout.splitlines()  # fmt: skip
    listed = [line for line in listed if line.startswith(f"pg.{schema}|")]
    sql = (
        "SELECT table_name, table_type FROM information_schema.tables "
        f"WHERE table_catalog = 'pg' AND table_schema = '{schema}' ORDER BY table_name"
    )
    return listed, _psql(sql, port=port, user="t", db=dbname, width=2)


def test_tables_created_after_the_start_are_listed(schema: str, wire: tuple[int, str]) -> None:
    port, dbname = wire
    listed, tables = _listings(port, dbname, schema)
    assert listed == [f"pg.{schema}|types|table|duckdb"]
    assert [name for name, _ in tables] == ["types"]
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {schema}.later (id int, at date)")
        conn.execute(f"CREATE VIEW {schema}.seen AS SELECT id FROM {schema}.later")
    listed, tables = _listings(port, dbname, schema)
    assert sorted(listed) == [f"pg.{schema}|{t}|table|duckdb" for t in ("later", "seen", "types")]
    assert [name for name, _ in tables] == ["later", "seen", "types"]
    describe = _psql(f"DESCRIBE pg.{schema}.later", port=port, user="t", db=dbname, width=6)
    assert [(row[0], row[1]) for row in describe] == [("id", "INTEGER"), ("at", "DATE")]
    wire_dsn = f"host=127.0.0.1 port={port} user=t dbname={dbname}"
    with psycopg.connect(wire_dsn) as wire_conn:  # a transaction keeps the listing it saw
        query = "SELECT count(*) FROM information_schema.tables WHERE table_catalog = 'pg'"
        before = wire_conn.execute(query).fetchone()
        with psycopg.connect(DSN, autocommit=True) as conn:
            conn.execute(f"DROP TABLE {schema}.types")
        assert wire_conn.execute(query).fetchone() == before
        wire_conn.rollback()
        after = wire_conn.execute(query).fetchone()
    assert after is not None and before is not None and after[0] == before[0] - 1
    listed, _ = _listings(port, dbname, schema)
    assert sorted(listed) == [f"pg.{schema}|{t}|table|duckdb" for t in ("later", "seen")]
    # Another session attaching the changed catalog while a transaction holds the old one:
    # that transaction's next listing is a serialization failure, which clients retry.
    with psycopg.connect(wire_dsn) as wire_conn:
        wire_conn.execute(query).fetchone()
        with psycopg.connect(DSN, autocommit=True) as conn:
            conn.execute(f"CREATE TABLE {schema}.third (id int)")
        _listings(port, dbname, schema)
        with pytest.raises(psycopg.errors.SerializationFailure, match=r"changed.*retry"):
            wire_conn.execute(query)
        wire_conn.rollback()
        assert wire_conn.execute(query).fetchone() == (3,)
