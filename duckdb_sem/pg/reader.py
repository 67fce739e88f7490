"""Read one PostgreSQL query into Arrow through ``COPY (SELECT ...) TO STDOUT``.

PostgreSQL streams CSV; pyarrow's streaming CSV reader parses it block by block with the
column types known from the catalog, so no value passes through Python one by one. In the CSV
``COPY`` writes, NULL is an unquoted empty field and the empty string is ``""``, which
``quoted_strings_can_be_null=False`` keeps apart.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import psycopg
import pyarrow as pa
import pyarrow.csv as pacsv

from duckdb_sem.identifiers import quote_identifier

__all__ = ["PgColumn", "arrow_type", "copy_sql", "read_query"]

_BLOCK = 1 << 20


@dataclass(frozen=True, slots=True)
class PgColumn:
    name: str
    pg_type: str  # pg_catalog.format_type() spelling: integer, numeric(10,2), text...

    @property
    def select_expr(self) -> str:
        """How the column is selected for COPY (text for types Arrow cannot parse as is)."""
        quoted = quote_identifier(self.name)
        kind = self.pg_type.split("(")[0]
        if kind == "timestamp with time zone":
            return f"({quoted} AT TIME ZONE 'UTC') AS {quoted}"
        if arrow_type(self.pg_type) == pa.string() and kind not in {"text", "character varying"}:
            return f"{quoted}::text AS {quoted}"
        return quoted


def arrow_type(pg_type: str) -> pa.DataType:
    """The Arrow type a PostgreSQL column is read as (anything unknown: text)."""
    kind, _, args = pg_type.partition("(")
    simple = {
        "smallint": pa.int16(),
        "integer": pa.int32(),
        "bigint": pa.int64(),
        "real": pa.float32(),
        "double precision": pa.float64(),
        "boolean": pa.bool_(),
        "date": pa.date32(),
        "timestamp without time zone": pa.timestamp("us"),
        "timestamp with time zone": pa.timestamp("us", tz="UTC"),
    }
    if kind in simple:
        return simple[kind]
    if kind == "numeric":
        parts = [p.strip() for p in args.rstrip(")").split(",") if p.strip()]
        if parts and int(parts[0]) <= 38:
            return pa.decimal128(int(parts[0]), int(parts[1]) if len(parts) > 1 else 0)
        return pa.float64()
    return pa.string()


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


def _copy_chunks(dsn: str, sql: str) -> Iterator[bytes]:
    with (
        psycopg.connect(dsn, autocommit=True) as conn,
        conn.cursor() as cur,
        cur.copy(sql) as copy,
    ):
        for chunk in copy:
            yield bytes(chunk)


def read_query(
    dsn: str, table_sql: str, columns: Sequence[PgColumn], where: str | None
) -> pa.Table:
    """Rows of ``SELECT columns FROM table_sql WHERE where`` as an Arrow table."""
    schema = pa.schema([(c.name, arrow_type(c.pg_type)) for c in columns])
    chunks = _copy_chunks(dsn, copy_sql(table_sql, columns, where))
    first = next(chunks, None)
    if first is None:
        return schema.empty_table()

    def all_chunks() -> Iterator[bytes]:
        yield first
        yield from chunks

    parse_schema = pa.schema(
        [(f.name, pa.timestamp("us") if pa.types.is_timestamp(f.type) else f.type) for f in schema]
    )
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
    table = reader.read_all()
    return table.cast(schema) if table.schema != schema else table
