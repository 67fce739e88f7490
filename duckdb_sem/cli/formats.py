"""Results as ``--format table|csv|json``: every DuckDB type, written as DuckDB writes it.

``table`` renders each value with DuckDB's own ``CAST(x AS VARCHAR)`` (``llm/render.py``), so a
list reads ``[1, 2]``, a map ``{k=2}``, a blob ``\\xAA``, a decimal ``1.25`` and NULL ``NULL``.
``csv`` and ``json`` are written by DuckDB's ``COPY ... TO`` (CSV with a header; JSON as one
array of row objects on one line, so each statement's result is one document), from a private
in-memory connection set to the result's time zone: nested values, decimals, timestamps,
intervals and blobs come out exactly as DuckDB's own writers make them.

Example:
    >>> write_result(pa.table({"l": [[1, 2]]}), "csv", sys.stdout.buffer)  # doctest: +SKIP
    l
    "[1, 2]"
    >>> write_result(pa.table({"a": [1, 2]}), "json", sys.stdout.buffer)  # doctest: +SKIP
    [{"a":1},{"a":2}]
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import BinaryIO

import duckdb
import pyarrow as pa
from rich.table import Table

from duckdb_sem.llm.render import render_column

__all__ = ["FORMATS", "explain_text", "render_table", "write_result"]

FORMATS = ("table", "csv", "json")

_COPY_OPTIONS = {"csv": "FORMAT csv, HEADER true", "json": "FORMAT json, ARRAY true"}


def render_table(table: pa.Table, *, title: str | None = None, max_rows: int = 50) -> Table:
    """A rich table of the first ``max_rows`` rows, values as DuckDB's ``::VARCHAR``."""
    out = Table(title=title, show_lines=False)
    for name in table.column_names:
        out.add_column(name, overflow="fold", max_width=60)
    shown = table.slice(0, max_rows)
    columns = [render_column(shown.column(i)) for i in range(shown.num_columns)]
    for row in zip(*columns, strict=True):
        out.add_row(*("NULL" if v is None else v for v in row))
    if table.num_rows > max_rows:
        out.caption = f"{table.num_rows} rows, first {max_rows} shown"
    return out


def explain_text(table: pa.Table) -> str:
    """An EXPLAIN result as its text: the plan lines of ``EXPLAIN SEMANTIC`` (column ``plan``)
    or the plan drawings of DuckDB's ``EXPLAIN`` (its last column, ``explain_value``)."""
    if table.num_columns == 0:
        return ""
    return "\n".join(str(v) for v in table.column(table.num_columns - 1).to_pylist())


def write_result(table: pa.Table, fmt: str, out: BinaryIO) -> None:
    """Write ``table`` to ``out`` as ``csv`` or ``json`` with DuckDB's COPY writers."""
    options = _COPY_OPTIONS[fmt]
    con = duckdb.connect(":memory:", config={"threads": "1"})
    try:
        zone = _zone(table.schema)
        if zone:
            con.execute("SET TimeZone = $1", [zone])
        con.register("result", table)
        with tempfile.TemporaryDirectory(prefix="duckdb-sem-") as folder:
            path = Path(folder) / f"result.{fmt}"
            escaped = str(path).replace("'", "''")
            con.execute(f"COPY result TO '{escaped}' ({options})")
            if fmt == "json":
                # DuckDB writes the array a row a line; strings are escaped, so every raw
                # newline and tab is layout and the document fits on one line.
                out.write(path.read_bytes().replace(b"\n\t", b"").replace(b"\n", b"") + b"\n")
            else:
                with path.open("rb") as written:
                    while chunk := written.read(1 << 20):
                        out.write(chunk)
    finally:
        con.close()
    out.flush()


def _zone(schema: pa.Schema) -> str | None:
    """The time zone DuckDB tagged the result's timestamps with (its session's), if any."""
    for field in schema:
        if pa.types.is_timestamp(field.type) and field.type.tz:
            return str(field.type.tz)
    return None
