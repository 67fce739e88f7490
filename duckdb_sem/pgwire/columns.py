"""An Arrow result column as the Python values its PostgreSQL encoders take.

Most types are Arrow's own Python values (``to_pylist``). Dates, times and timestamps are their
integers instead (days since 1970-01-01, microseconds), since Python's ``datetime`` holds
neither ``infinity``, BC years, years past 9999 nor ``24:00:00``; intervals are
``(months, days, microseconds)``; a list column is a list per row of its elements' values, so
a list of dates is a list of day numbers.

Example: ``date_values(pa.array([0], pa.date32()))`` is ``[0]``;
``list_values(date_values)(pa.array([[0, None]], pa.list_(pa.date32())))`` is ``[[0, None]]``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

__all__ = [
    "Values",
    "date_values",
    "interval_values",
    "list_values",
    "pylist",
    "time_values",
    "timestamp_values",
]

#: a column's values, None for NULL, as its encoders take them
Values = Callable[[pa.Array], list[Any]]

_INT64_MAX = 2**63 - 1
_PER_MICRO = {"s": (1_000_000, 1), "ms": (1000, 1), "us": (1, 1), "ns": (1, 1000)}


def pylist(array: pa.Array) -> list[Any]:
    values: list[Any] = array.to_pylist()
    return values


def date_values(array: pa.Array) -> list[Any]:
    """Day numbers; DuckDB's ``infinity``/``-infinity`` are +/-(2**31 - 1)."""
    if pa.types.is_date64(array.type):  # milliseconds
        return [None if v is None else v // 86_400_000 for v in array.cast(pa.int64()).to_pylist()]
    return pylist(array.view(pa.int32()))


def _micros(array: pa.Array, unit: str) -> list[Any]:
    raw = pylist(array.view(pa.int64()))
    times, divide = _PER_MICRO[unit]
    if times == divide == 1:
        return raw
    return [None if v is None else v if abs(v) == _INT64_MAX else v * times // divide for v in raw]


def timestamp_values(array: pa.Array) -> list[Any]:
    """Microseconds since 1970-01-01 (UTC for a timestamptz); infinities as +/-(2**63 - 1)."""
    return _micros(array, array.type.unit)


def time_values(array: pa.Array) -> list[Any]:
    """Microseconds since midnight (``24:00:00`` is 86,400,000,000)."""
    if pa.types.is_time32(array.type):
        raw = array.view(pa.int32()).to_pylist()
        times = 1000 if array.type.unit == "ms" else 1_000_000
        return [None if v is None else v * times for v in raw]
    return _micros(array, array.type.unit)


def interval_values(array: pa.Array) -> list[Any]:
    """``(months, days, microseconds)``; a duration is all microseconds."""
    if pa.types.is_duration(array.type):
        return [None if v is None else (0, 0, v) for v in _micros(array, array.type.unit)]
    return [
        None if v is None else (v.months, v.days, int(v.nanoseconds) // 1000)
        for v in array.to_pylist()
    ]


def list_values(element: Values) -> Values:
    """The values of a list column whose elements' values ``element`` gives."""

    def values(array: pa.Array) -> list[Any]:
        if pa.types.is_fixed_size_list(array.type) or pa.types.is_large_list(array.type):
            array = array.cast(pa.list_(array.type.value_type))
        flat = iter(element(array.flatten()))
        return [
            None if n is None else [next(flat) for _ in range(n)]
            for n in array.value_lengths().to_pylist()
        ]

    return values
