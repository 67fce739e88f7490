"""Read one PostgreSQL query into Arrow through ``COPY (SELECT ...) TO STDOUT``.

PostgreSQL streams CSV; pyarrow's streaming CSV reader parses it block by block with the
column types known from the catalog, so no value passes through Python one by one. In the CSV
``COPY`` writes, NULL is an unquoted empty field and the empty string is ``""``, which
``quoted_strings_can_be_null=False`` keeps apart. What each type is selected and parsed as is
:mod:`duckdb_sem.pg.types`; the few columns Arrow cannot cast to their final type (bytea,
interval, arrays) are converted by a private in-memory DuckDB, vectorised, after the read.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import duckdb
import psycopg
import pyarrow as pa
import pyarrow.csv as pacsv
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from duckdb_sem.errors import BackendUnavailableError, ConfigError, PlanError
from duckdb_sem.identifiers import quote_identifier
from duckdb_sem.pg.types import PgRead, read_as

__all__ = ["PgColumn", "arrow_type", "connect", "copy_sql", "read_query"]

_BLOCK = 1 << 20
# Output formats the parsing relies on, whatever the server or role sets by default.
_SETTINGS = "-c bytea_output=hex -c DateStyle=ISO,MDY -c extra_float_digits=1"


@dataclass(frozen=True, slots=True)
class PgColumn:
    name: str
    pg_type: str  # pg_catalog.format_type() spelling: integer, numeric(10,2), text...

    @property
    def read(self) -> PgRead:
        return read_as(self.pg_type)

    @property
    def select_expr(self) -> str:
        """How the column is selected for COPY (see :mod:`duckdb_sem.pg.types`)."""
        return self.read.select(quote_identifier(self.name))


def arrow_type(pg_type: str) -> pa.DataType:
    """The Arrow type a PostgreSQL column is handed to DuckDB as, before any conversion."""
    read = read_as(pg_type)
    return read.final or read.parse


def copy_sql(table_sql: str, columns: Sequence[PgColumn], where: str | None) -> str:
    select = ", ".join(c.select_expr for c in columns)
    condition = f" WHERE {where}" if where else ""
    return f"COPY (SELECT {select} FROM {table_sql}{condition}) TO STDOUT WITH (FORMAT csv)"


class _ChunkStream(io.RawIOBase):
    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._buffer = b""

    def readable(self) -> bool:
        return True

    def readinto(self, target: bytearray | memoryview) -> int:  # type: ignore[override]
        while not self._buffer:
            try:
                self._buffer = bytes(next(self._chunks))
            except StopIteration:
                return 0
        n = min(len(target), len(self._buffer))
        target[:n] = self._buffer[:n]
        self._buffer = self._buffer[n:]
        return n


def connect(dsn: str) -> psycopg.Connection[tuple[object, ...]]:
    """A connection for catalog reads and ``COPY``, with the output formats the parsing expects."""
    try:
        parts = conninfo_to_dict(dsn)
    except psycopg.Error as err:
        raise ConfigError(
            f"not a libpq connection string: {str(err).strip()}; write it as 'host=... dbname=...' or "
            "postgresql://host/dbname"
        ) from None
    given = parts.get("options")
    try:
        options = f"{given} {_SETTINGS}" if given else _SETTINGS
        return psycopg.connect(dsn, autocommit=True, options=options)
    except psycopg.Error as err:
        shown = {k: str(v) for k, v in parts.items() if k != "password" and v is not None}
        raise BackendUnavailableError(
            f"cannot connect to PostgreSQL {make_conninfo(**shown)!r}: {' '.join(str(err).split())}"
            "; check the DSN and that the server is up"
        ) from None


def _copy_chunks(conn: psycopg.Connection[tuple[object, ...]], sql: str) -> Iterator[bytes]:
    with conn.cursor() as cur, cur.copy(sql) as copy:
        for chunk in copy:
            yield bytes(chunk)


def read_query(
    conn: psycopg.Connection[tuple[object, ...]],
    table_sql: str,
    columns: Sequence[PgColumn],
    where: str | None,
) -> pa.Table:
    """Rows of ``SELECT columns FROM table_sql WHERE where`` as an Arrow table."""
    try:
        return _read(conn, table_sql, columns, where)
    except psycopg.DataError as err:
        raise PlanError(
            f"PostgreSQL cannot send {table_sql} as duckdb-sem reads it: "
            f"{str(err).splitlines()[0]}; a timestamp after 294247 AD does not fit DuckDB: "
            "select such a column as text in a PostgreSQL view (col::text) and read the view"
        ) from None
    except psycopg.Error as err:
        raise BackendUnavailableError(
            f"reading {table_sql} from PostgreSQL failed: {str(err).splitlines()[0]}"
        ) from None


def _read(
    conn: psycopg.Connection[tuple[object, ...]],
    table_sql: str,
    columns: Sequence[PgColumn],
    where: str | None,
) -> pa.Table:
    parse_schema = pa.schema([(c.name, c.read.parse) for c in columns])
    chunks = _copy_chunks(conn, copy_sql(table_sql, columns, where))
    first = next(chunks, None)
    if first is None:
        return _finish(parse_schema.empty_table(), columns)

    def all_chunks() -> Iterator[bytes]:
        yield first
        yield from chunks

    reader = pacsv.open_csv(
        io.BufferedReader(_ChunkStream(all_chunks()), buffer_size=_BLOCK),
        read_options=pacsv.ReadOptions(
            column_names=[c.name for c in columns], use_threads=False, block_size=_BLOCK
        ),
        # A row whose only column is NULL is an empty line: keep it (a row, not a blank).
        parse_options=pacsv.ParseOptions(newlines_in_values=True, ignore_empty_lines=False),
        convert_options=pacsv.ConvertOptions(
            column_types=parse_schema,
            null_values=[""],
            strings_can_be_null=True,
            quoted_strings_can_be_null=False,
            true_values=["t"],
            false_values=["f"],
        ),
    )
    return _finish(reader.read_all(), columns)


def _finish(table: pa.Table, columns: Sequence[PgColumn]) -> pa.Table:
    """Cast what Arrow can cast; convert the rest (bytea, interval, arrays) in DuckDB."""
    casts = pa.schema([(c.name, arrow_type(c.pg_type)) for c in columns])
    if casts != table.schema:
        table = table.cast(casts)
    if all(c.read.convert is None for c in columns):
        return table
    exprs = []
    for c in columns:
        quoted = quote_identifier(c.name)
        convert = c.read.convert
        exprs.append(f"{convert.format(c=quoted)} AS {quoted}" if convert else quoted)
    converter = duckdb.connect(":memory:")
    try:
        converter.register("pg_read", table)
        query = converter.sql(f"SELECT {', '.join(exprs)} FROM pg_read")
        return query.to_arrow_table()
    except duckdb.ConversionException as err:
        raise PlanError(
            f"a PostgreSQL value does not fit its DuckDB type: {str(err).splitlines()[0]}; "
            "arrays are read as one-dimensional lists: select a multi-dimensional array as "
            "text in a PostgreSQL view (col::text) and read the view"
        ) from None
    finally:
        converter.close()
