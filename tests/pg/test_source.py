"""PostgreSQL tables as sources: pushdown decisions (pure) and reads from the real server."""

from __future__ import annotations

import datetime as dt
import socket
import uuid
from collections.abc import Iterator

import duckdb
import psycopg
import pytest
import sqlglot
from sqlglot import exp

import duckdb_sem
from duckdb_sem.errors import BackendUnavailableError, ConfigError
from duckdb_sem.pg import attach_postgres
from duckdb_sem.pg.pushdown import scan_needs
from duckdb_sem.pg.reader import connect
from duckdb_sem.pg.types import read_as

DSN = "host=127.0.0.1 port=5432 user=postgres dbname=test"
COLUMNS = ["id", "text", "stars"]


def _needs(sql: str) -> tuple[tuple[str, ...], str | None]:
    root = sqlglot.parse_one(sql, dialect="duckdb")
    table = next(t for t in root.find_all(exp.Table) if t.catalog == "pg")
    needs = scan_needs(root, table, COLUMNS)
    return needs.columns, needs.where


@pytest.mark.parametrize(
    ("sql", "columns", "where"),
    [
        ("SELECT id FROM pg.public.r WHERE stars >= 4 AND sem_filter('{text} is good')",
         ("id", "text", "stars"), '("stars" >= 4)'),
        ("SELECT * FROM pg.public.r x WHERE x.id IN (1, 2) OR x.text LIKE 'a%'",
         ("id", "text", "stars"), "(\"id\" IN (1, 2) OR \"text\" LIKE 'a%')"),
        ("SELECT count(*) FROM pg.public.r WHERE lower(text) = 'a'", ("text",), None),
        ("SELECT r.id FROM t LEFT JOIN pg.public.r r ON t.id = r.id WHERE r.stars IS NULL",
         ("id", "stars"), None),
    ],
)  # fmt: skip
def test_pushdown_decisions(sql: str, columns: tuple[str, ...], where: str | None) -> None:
    assert _needs(sql) == (columns, where)


@pytest.fixture
def pg_table() -> Iterator[str]:
    try:
        socket.create_connection(("127.0.0.1", 5432), timeout=1).close()
    except OSError:
        pytest.skip("no PostgreSQL on 127.0.0.1:5432")
    name = f"dsem_t_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(
            f"CREATE TABLE {name} (id INTEGER, text TEXT, stars INTEGER, at TIMESTAMPTZ, ok BOOLEAN)"
        )
        conn.execute(
            f"INSERT INTO {name} VALUES (1, 'good, with \"quotes\"\nand lines', 5, '2024-01-01 10:00+02', true),"
            " (2, 'bad', 1, NULL, false), (3, NULL, 4, NULL, NULL), (4, '', 3, NULL, true)"
        )
        try:
            yield name
        finally:
            conn.execute(f"DROP TABLE IF EXISTS {name}")


@pytest.mark.integration
def test_reads_postgres_table_with_semantic_filter(pg_table: str) -> None:
    with duckdb_sem.connect(backend="test:?yes_if=good", cache="off") as con:
        _check_reads(con, pg_table)


def _check_reads(con: duckdb_sem.SemConnection, pg_table: str) -> None:
    source = attach_postgres(con.duckdb, DSN, alias="pg")
    sql = f"SELECT id, text FROM pg.public.{pg_table} WHERE stars >= 2 AND sem_filter('{{text}} is positive')"
    assert con.execute(source.rewrite(sql, con.duckdb)).fetchall() == [
        (1, 'good, with "quotes"\nand lines')
    ]
    rows = con.execute(
        source.rewrite(f"SELECT * FROM pg.public.{pg_table} ORDER BY id", con.duckdb)
    ).fetchall()
    assert [r[1] for r in rows] == ['good, with "quotes"\nand lines', "bad", None, ""]
    assert str(rows[0][3].astimezone(dt.UTC)) == "2024-01-01 08:00:00+00:00"
    assert [r[4] for r in rows] == [True, False, None, True]
    # Without the rewrite, every read is an error, whatever it filters or projects: never [].
    for unrewritten in (
        f"SELECT * FROM pg.public.{pg_table}",
        f"SELECT id FROM pg.public.{pg_table} WHERE id = 3",
        f"SELECT count(*) FROM pg.public.{pg_table} WHERE text IS NULL AND text = 'x'",
        f"SELECT count(*) FROM (SELECT stars FROM pg.public.{pg_table})",
    ):
        with pytest.raises(duckdb.Error, match="PostgreSQL table"):
            con.sql(unrewritten).fetchall()
    # The catalog is read-only: nothing can be added to it.
    with pytest.raises(duckdb.Error, match="read-only"):
        con.execute("CREATE TABLE pg.public.scratch (a INTEGER)")


@pytest.mark.integration
def test_a_pushed_down_statement_is_parsed_once(pg_table: str, sqlglot_parses: list[int]) -> None:
    """The pushdown's AST is the one the front end plans (as the wire server passes it)."""
    with duckdb_sem.connect(backend="test:?yes_if=good", cache="off") as con:
        source = attach_postgres(con.duckdb, DSN, alias="pg")
        start = sqlglot_parses[0]
        sql = f"SELECT id FROM pg.public.{pg_table} WHERE sem_filter('{{text}} is positive')"
        rewritten, tree = source.rewrite_parsed(sql, con.duckdb)
        assert tree is not None
        assert con.sql(rewritten, tree=tree).fetchall() == [(1,)]
        assert sqlglot_parses[0] - start == 1


def test_connection_errors_say_what_to_fix_and_hide_the_password() -> None:
    with pytest.raises(ConfigError, match="not a libpq connection string"):
        connect("host=127.0.0.1 bad")
    with pytest.raises(BackendUnavailableError, match=r"port=1.*check the DSN") as err:
        connect("host=127.0.0.1 port=1 dbname=x password=secret connect_timeout=2")
    assert "secret" not in str(err.value)


@pytest.mark.parametrize(
    ("pg_type", "duck_type"),
    [
        ("timestamp(3) with time zone", "TIMESTAMPTZ"), ("time(2) without time zone", "TIME"),
        ("interval year to month", "INTERVAL"), ("interval(3)", "INTERVAL"),
        ("numeric(38,4)", "DECIMAL(38,4)"), ("numeric(39,4)", "VARCHAR"), ("numeric", "VARCHAR"),
        ("character varying(20)[]", "VARCHAR[]"), ("double precision[]", "DOUBLE[]"),
        ("numeric[]", "VARCHAR"), ("character(5)", "VARCHAR"), ("bytea", "BLOB"),
        ("intervals", "VARCHAR"), ("s.mood", "VARCHAR"), ("time(2) with time zone", "VARCHAR"),
    ],
)  # fmt: skip
def test_each_type_reads_as(pg_type: str, duck_type: str) -> None:
    """format_type() spellings, typmods and user types named like built-in ones."""
    assert read_as(pg_type).duck_type == duck_type
