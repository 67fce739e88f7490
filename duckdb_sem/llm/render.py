"""How a column value becomes prompt text: DuckDB's own ``::VARCHAR``, for every entry.

A value reaches the engine by three roads: as ``VARCHAR`` already cast by DuckDB (the ``sem_*``
macros of ``install(con)`` pass ``a0::VARCHAR``), as a typed Arrow column (the planned path, the
table functions), or sampled by the estimator. All of them render through
:func:`render_column`, which leaves strings alone and casts anything else with DuckDB's
``CAST(x AS VARCHAR)``, so ``REAL 1.5`` is ``1.5``, ``BOOLEAN`` is ``true`` and a ``TIMESTAMPTZ``
reads as it does in the session that produced it (DuckDB tags exported timestamps with the
session's time zone, and the cast here runs in that zone). The same value therefore makes the
same prompt, and the same cache key, whichever API sent the query.

Example:
    >>> render_column(pa.array([1.5, None], type=pa.float32()))
    ['1.5', None]
    >>> render_column(pa.array([True, False]))
    ['true', 'false']
"""

from __future__ import annotations

import threading

import duckdb
import pyarrow as pa

__all__ = ["render_column", "render_lists"]

_local = threading.local()


def _connection(time_zone: str) -> duckdb.DuckDBPyConnection:
    """A private in-memory DuckDB per thread, set to ``time_zone``."""
    con: duckdb.DuckDBPyConnection | None = getattr(_local, "con", None)
    if con is None:
        con = duckdb.connect(":memory:", config={"threads": "1"})
        _local.con, _local.zone = con, ""
    if _local.zone != time_zone:
        con.execute("SET TimeZone = $1", [time_zone])
        _local.zone = time_zone
    return con


def _is_text(t: pa.DataType) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t))


def _zone(t: pa.DataType) -> str:
    """The time zone a timestamp column carries (DuckDB exports the session's), else UTC."""
    if pa.types.is_timestamp(t) and t.tz:
        return str(t.tz)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _zone(t.value_type)
    if pa.types.is_struct(t):
        for i in range(t.num_fields):
            zone = _zone(t.field(i).type)
            if zone != "UTC":
                return zone
    if pa.types.is_map(t):
        return _zone(t.item_type)
    return "UTC"


def render_column(array: pa.Array | pa.ChunkedArray) -> list[str | None]:
    """Each value of ``array`` as DuckDB's ``::VARCHAR`` writes it (NULL stays None)."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if _is_text(array.type):
        values: list[str | None] = array.to_pylist()
        return values
    if pa.types.is_dictionary(array.type) and _is_text(array.type.value_type):
        return [None if v is None else str(v) for v in array.to_pylist()]
    if pa.types.is_null(array.type):
        return [None] * len(array)
    con = _connection(_zone(array.type))
    con.register("__sem_render", pa.table({"v": array}))
    try:
        rows = con.sql("SELECT CAST(v AS VARCHAR) FROM __sem_render").fetchall()
    finally:
        con.unregister("__sem_render")
    return [r[0] for r in rows]


def render_lists(array: pa.Array | pa.ChunkedArray) -> list[list[str | None] | None]:
    """A list column (``sem_agg``'s groups) with each item rendered by :func:`render_column`."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if not (pa.types.is_list(array.type) or pa.types.is_large_list(array.type)):
        raise TypeError(f"expected a list column, got {array.type}")
    items = render_column(array.flatten())
    out: list[list[str | None] | None] = []
    at = 0
    for length in array.value_lengths().to_pylist():
        if length is None:
            out.append(None)
            continue
        out.append(items[at : at + length])
        at += length
    return out
