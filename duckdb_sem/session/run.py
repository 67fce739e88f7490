"""Running a planned statement on the session's connection: units, then its SELECT, then its write.

Everything happens inside the statement's one transaction (:mod:`.transaction`), on the
connection the user's own statements run on:

1. the units (semantic subqueries computed on their own: a CTE read twice, a branch of a
   UNION, an ``IN (...)`` subquery) run first, each to its end, in dependency order; each
   one's rows are registered under its name for the rest of the statement, and unregistered
   when the statement ends (they never show in ``SHOW TABLES``);
2. the SELECT runs on the SEU loop (``run``), or, when no semantic call is left in it, in
   DuckDB over the units' rows;
3. a write (``CREATE TABLE ... AS``, ``INSERT``, ``UPDATE``, ``DELETE``) takes the SELECT's
   rows batch by batch, each registered as :data:`~duckdb_sem.plan.statement.ROWS` while its
   write statement runs; a LIMIT in the SELECT still stops its LLM work.

Example: ``CREATE TABLE hits AS SELECT id FROM r WHERE sem_filter('{text} ok') LIMIT 5``
creates ``hits`` from the SELECT's first (empty) batch, then inserts each batch of rows the
SEU loop yields, and stops once 5 rows are out.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import duckdb
import pyarrow as pa

from duckdb_sem.plan.nodes import Node
from duckdb_sem.plan.statement import ROWS, Write
from duckdb_sem.runtime.execute_plan import drop_views
from duckdb_sem.session.statements import Planned
from duckdb_sem.session.transaction import StatementTransaction

__all__ = ["RunSelect", "count_table", "open_rows", "write_rows"]

#: runs one planned SELECT (its SQL and written plan) on the SEU loop, as an Arrow stream
RunSelect = Callable[[str, Node], pa.RecordBatchReader]


def open_rows(
    con: duckdb.DuckDBPyConnection,
    planned: Planned,
    transaction: StatementTransaction,
    *,
    run: RunSelect,
) -> pa.RecordBatchReader:
    """The rows of ``planned``: its units computed and registered (until ``transaction``
    ends), then its SELECT as a stream (the SEU loop, SEU by SEU as it is read)."""
    names: list[str] = []
    transaction.on_end(lambda: drop_views(con, names))
    for unit_name, unit in planned.units_in_order():
        con.register(unit_name, _rows(con, unit, run).read_all())
        names.append(unit_name)
    return _rows(con, planned, run)


def _rows(con: duckdb.DuckDBPyConnection, planned: Planned, run: RunSelect) -> pa.RecordBatchReader:
    """One query's rows: the SEU loop's stream, or DuckDB's over its units' rows."""
    if planned.plan is not None:
        return run(planned.sql, planned.plan)
    table = con.sql(planned.sql).to_arrow_table()
    return pa.RecordBatchReader.from_batches(table.schema, table.to_batches())


def write_rows(con: duckdb.DuckDBPyConnection, write: Write, rows: pa.RecordBatchReader) -> int:
    """Write every batch of ``rows`` as ``write`` says; the number of rows written."""
    if write.target is not None and _exists(con, write.target):
        rows.close()  # CREATE ... IF NOT EXISTS of a table that exists: nothing to do
        return 0
    written = 0
    first = True
    for batch in rows:
        if not first and batch.num_rows == 0:
            continue
        con.register(ROWS, batch)
        try:
            con.execute(write.first if first else write.rest)
        finally:
            with contextlib.suppress(duckdb.Error):
                con.unregister(ROWS)
        first = False
        written += batch.num_rows
    return written


def _exists(con: duckdb.DuckDBPyConnection, table: str) -> bool:
    try:
        con.sql(f"SELECT * FROM {table} LIMIT 0")
    except duckdb.Error:
        return False
    return True


def count_table(rows: int) -> pa.Table:
    """DuckDB's answer to a write: one ``Count`` row."""
    return pa.table({"Count": pa.array([rows], type=pa.int64())})
