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

One query reads the rowid bounds and the row count of the scan (its filters applied, so the
bounds are those of the rows it will give). Windows adapt: one that yields few rows (a selective predicate) is followed by a wider one, up
to :data:`MAX_WINDOW` rows, so memory stays bounded by a window whatever the table's size.

Example: a table of rowids 0..9,999 read with windows of 4,096 reads ``[0, 4096)``,
``[4096, 8192)``, ``[8192, 10000)``; after a ``DELETE`` of rows 4,096..8,191 the empty middle
window is skipped by one ``min(rowid)`` query.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Any

import duckdb
import pyarrow as pa

from duckdb_sem.plan.nodes import Scan, quote
from duckdb_sem.runtime.plan_sql import scan_sql

__all__ = ["MAX_WINDOW", "MIN_WINDOW", "ROWID", "driving_reader"]

#: rows of the first window, and the widest one
MIN_WINDOW = 2048
MAX_WINDOW = 131_072
#: the column a bounds query reads a scan's rowids by
ROWID = "__sem_rowid"
_ROWID = quote(ROWID)


def driving_reader(
    con: Any, scan: Scan, *, order: Sequence[str] = (), first: int = MIN_WINDOW
) -> tuple[pa.RecordBatchReader, int]:
    """The rows of ``scan`` (its columns as attributes, its filters applied) as a reader whose
    every batch is one window query on ``con``, run when the batch is read; and how many rows
    it will give."""
    source = scan_sql(scan)
    if not order:
        counted = _rowid_bounds(con, scan)
        if counted is not None:
            total, low, high = counted
            windows = _rowid_windows(con, scan, low, high, first)
            head = next(windows, None)
            if head is None:
                schema = _schema(con, source)
                return pa.RecordBatchReader.from_batches(schema, iter(())), total
            return _reader(head.schema, itertools.chain([head], windows)), total
        table: pa.Table = con.sql(source).to_arrow_table()
        return _reader(
            table.schema, iter(table.to_batches(max_chunksize=MAX_WINDOW))
        ), table.num_rows
    ((total,),) = con.sql(f"SELECT count(*) FROM ({source})").fetchall()
    schema = _schema(con, source)
    return _reader(schema, _pages(con, source, order, schema.names, first)), int(total)


def _schema(con: Any, source: str) -> pa.Schema:
    schema: pa.Schema = con.sql(f"SELECT * FROM ({source}) LIMIT 0").to_arrow_table().schema
    return schema


def _reader(schema: pa.Schema, batches: Iterator[pa.RecordBatch]) -> pa.RecordBatchReader:
    return pa.RecordBatchReader.from_batches(schema, _cast(batches, schema))


def _cast(batches: Iterator[pa.RecordBatch], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        yield batch if batch.schema.equals(schema) else batch.cast(schema)


def _rowid_bounds(con: Any, scan: Scan) -> tuple[int, int, int] | None:
    """(rows, lowest rowid, highest rowid) of the scan's rows in the statement's snapshot, or
    None when what it reads has no rowids (a view, a file, a table function, a DataFrame)."""
    try:
        ((total, low, high),) = con.sql(
            f"SELECT count(*), min({_ROWID}), max({_ROWID}) "
            f"FROM ({scan_sql(scan, rowid_column=ROWID)})"
        ).fetchall()
    except duckdb.Error:
        return None
    if low is None:
        return 0, 0, -1
    return int(total), int(low), int(high)


def _next_width(width: int, got: int, want: int) -> int:
    """The next window's width after one of ``width`` rows yielded ``got`` (want ``want``)."""
    if got * 2 < want:
        return min(MAX_WINDOW, width * 2)
    return width


def _rowid_windows(
    con: Any, scan: Scan, low: int, high: int, first: int
) -> Iterator[pa.RecordBatch]:
    want = width = max(MIN_WINDOW, min(first, MAX_WINDOW))
    lo = low
    while lo <= high:
        hi = min(lo + width, high + 1)
        batch: pa.Table = con.sql(scan_sql(scan, rowids=(lo, hi))).to_arrow_table()
        if batch.num_rows:
            yield from batch.to_batches()
        width = _next_width(width, batch.num_rows, want)
        lo = hi
        if batch.num_rows == 0 and lo <= high:  # a gap (deleted rows, then new ones)
            ((nxt,),) = con.sql(
                f"SELECT min({_ROWID}) FROM ({scan_sql(scan, rowid_column=ROWID)}) "
                f"WHERE {_ROWID} >= {lo} AND {_ROWID} <= {high}"
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
