"""PostgreSQL's text output (what ``psql -At`` prints) of the values of an Arrow table.

The type test compares a PostgreSQL source read through duckdb-sem with psql's output for the
same rows; this is the one normalisation between them, and it follows PostgreSQL's output
functions (``date_out``, ``timestamp_out``, ``interval_out`` in the ``postgres`` style,
``float8out`` shortest-exact, ``array_out``, ``byteaout`` hex). Dates, times, timestamps,
intervals and floats are printed by the wire server's own encoders (``duckdb_sem.pgwire``'s
``datetimes`` and ``numbers``, over the integers of ``columns``), which the wire tests compare
with PostgreSQL's output directly, so a mistake in them fails those tests rather than hiding
here.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pyarrow as pa

from duckdb_sem.pgwire.columns import (
    date_values,
    interval_values,
    pylist,
    time_values,
    timestamp_values,
)
from duckdb_sem.pgwire.datetimes import (
    text_date,
    text_interval,
    text_time,
    text_timestamp,
    text_timestamptz,
)
from duckdb_sem.pgwire.numbers import text_float4, text_float8

__all__ = ["NULL", "pg_rows"]

NULL = "<NULL>"  # psql -P null=<NULL>


def _text(encode: Callable[[Any], bytes]) -> Callable[[Any], str]:
    return lambda v: encode(v).decode()


def _element(value: Any) -> str:
    if value is None:
        return "NULL"
    text = _scalar(value)
    special = text == "" or text.upper() == "NULL" or any(c in '{},"\\' for c in text)
    if special or any(c.isspace() for c in text):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, float):
        return text_float8(value).decode()
    if isinstance(value, bytes):
        return "\\x" + value.hex()
    if isinstance(value, list):
        return "{" + ",".join(_element(v) for v in value) + "}"
    if isinstance(value, Decimal | int | str):
        return str(value)
    raise TypeError(f"no PostgreSQL text for {value!r}")


def _column(column: pa.ChunkedArray) -> list[str]:
    kind = column.type
    array = column.combine_chunks()
    special: tuple[Callable[[pa.Array], list[Any]], Callable[[Any], str]] | None = None
    if pa.types.is_date32(kind):
        special = date_values, _text(text_date)
    elif pa.types.is_timestamp(kind):
        special = timestamp_values, _text(text_timestamptz("UTC") if kind.tz else text_timestamp)
    elif pa.types.is_time64(kind):
        special = time_values, _text(text_time)
    elif pa.types.is_interval(kind):
        special = interval_values, _text(text_interval)
    elif pa.types.is_float32(kind):
        special = pylist, _text(text_float4)
    if special is not None:
        values, text = special
        return [NULL if v is None else text(v) for v in values(array)]
    return [NULL if v is None else _scalar(v) for v in array.to_pylist()]


def pg_rows(table: pa.Table) -> list[tuple[str, ...]]:
    """Each row as the strings ``psql -At -P null=<NULL>`` prints for its fields."""
    columns = [_column(table.column(i)) for i in range(table.num_columns)]
    return list(zip(*columns, strict=True))
