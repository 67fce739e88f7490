"""Reading the driving scan on the session's own connection, one bounded window at a time.

A DuckDB connection holds one open result at a time, and the SEU loop runs queries between its
batches (each SEU's region over its batch, the sink). A streaming reader of the driving scan
would need a second connection, and a DuckDB cursor is a second *session*: it does not see the
statement's transaction (its uncommitted inserts, updates and deletes), its TEMP tables or its
settings. So the driving scan is read in windows, each a complete query on the session's
connection, all inside the statement's one transaction (``session.transaction``):

- a table (persistent or TEMP) by ``rowid`` range, ``rowid >= lo AND rowid < hi``, which DuckDB
  prunes by its zone maps, so a window costs its own rows. The rowids the statement's snapshot
  holds bound the read: rows the statement itself inserts into the table it reads (``INSERT
  INTO t SELECT ... FROM t``) come after them and are never read back;
- an ordered read (the ``ORDER BY`` of a LIMIT the loop stops at) by top-N pages,
  ``ORDER BY keys, every column LIMIT w OFFSET k`` (the columns break ties, so pages never
  overlap);
- anything without a rowid (a view, a file, a table function, a registered DataFrame) is read
  once, whole, as an Arrow table, through the session connection.

Windows adapt: one that yields few rows (a selective predicate) is followed by a wider one, up
to :data:`MAX_WINDOW` rows, so memory stays bounded by a window whatever the table's size.

Example: a table of rowids 0..9,999 read with windows of 4,096 reads ``[0, 4096)``,
``[4096, 8192)``, ``[8192, 10000)``; after a ``DELETE`` of rows 4,096..8,191 the empty middle
window is skipped by one ``min(rowid)`` query.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import duckdb
import pyarrow as pa

from duckdb_sem.plan.nodes import Scan, quote
from duckdb_sem.runtime.plan_sql import scan_sql

__all__ = ["MAX_WINDOW", "MIN_WINDOW", "driving_reader"]

#: rows of the first window, and the widest one
MIN_WINDOW = 2048
MAX_WINDOW = 131_072


def driving_reader(
    con: Any, scan: Scan, *, order: Sequence[str] = (), first: int = MIN_WINDOW
) -> pa.RecordBatchReader:
    """The rows of ``scan`` (its columns as attributes, its filters applied) as a reader whose
    every batch is one window query on ``con``, run when the batch is read."""
    source = scan_sql(scan)
    schema = con.sql(f"SELECT * FROM ({source}) LIMIT 0").to_arrow_table().schema
    if order:
        batches = _pages(con, source, order, schema.names, first)
    elif _has_rowid(con, scan):
        batches = _rowid_windows(con, scan, first)
    else:
        table: pa.Table = con.sql(source).to_arrow_table()
        batches = iter(table.to_batches(max_chunksize=MAX_WINDOW))
    return pa.RecordBatchReader.from_batches(schema, _cast(batches, schema))


def _cast(batches: Iterator[pa.RecordBatch], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        yield batch if batch.schema.equals(schema) else batch.cast(schema)


def _has_rowid(con: Any, scan: Scan) -> bool:
    """Whether ``scan`` reads a table that has rowids (views, files and DataFrames do not)."""
    try:
        con.sql(
            f"SELECT {quote(scan.alias)}.rowid FROM {scan.table} AS {quote(scan.alias)} LIMIT 0"
        )
    except duckdb.Error:
        return False
    return True


def _next_width(width: int, got: int, want: int) -> int:
    """The next window's width after one of ``width`` rows yielded ``got`` (want ``want``)."""
    if got * 2 < want:
        return min(MAX_WINDOW, width * 2)
    return width


def _rowid_windows(con: Any, scan: Scan, first: int) -> Iterator[pa.RecordBatch]:
    alias, table = quote(scan.alias), scan.table
    ((low, high),) = con.sql(f"SELECT min(rowid), max(rowid) FROM {table}").fetchall()
    if low is None:
        return
    want = width = max(MIN_WINDOW, min(first, MAX_WINDOW))
    lo = int(low)
    while lo <= high:
        hi = min(lo + width, int(high) + 1)
        batch: pa.Table = con.sql(scan_sql(scan, rowids=(lo, hi))).to_arrow_table()
        yield from batch.to_batches()
        width = _next_width(width, batch.num_rows, want)
        lo = hi
        if batch.num_rows == 0 and lo <= high:  # maybe a gap (deleted rows, then new ones)
            ((nxt,),) = con.sql(
                f"SELECT min({alias}.rowid) FROM {table} AS {alias} "
                f"WHERE {alias}.rowid >= {lo} AND {alias}.rowid <= {int(high)}"
            ).fetchall()
            if nxt is None:
                return
            lo = int(nxt)


def _pages(
    con: Any, source: str, order: Sequence[str], columns: Sequence[str], first: int
) -> Iterator[pa.RecordBatch]:
    keys = ", ".join([*order, *(quote(c) for c in columns)])
    width = max(MIN_WINDOW, min(first, MAX_WINDOW))
    offset = 0
    while True:
        page: pa.Table = con.sql(
            f"SELECT * FROM ({source}) ORDER BY {keys} LIMIT {width} OFFSET {offset}"
        ).to_arrow_table()
        yield from page.to_batches()
        if page.num_rows < width:
            return
        offset += page.num_rows
        width = min(MAX_WINDOW, width * 2)
