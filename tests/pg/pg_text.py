"""PostgreSQL's text output (what ``psql -At`` prints) of the values of an Arrow table.

The type test compares a PostgreSQL source read through duckdb-sem with psql's output for the
same rows; this is the one normalisation between them, and it follows PostgreSQL's output
functions (``date_out``, ``timestamp_out``, ``interval_out`` in the ``postgres`` style,
``float8out`` shortest-exact, ``array_out``, ``byteaout`` hex) rather than anything of
duckdb-sem's. Dates and timestamps are formatted from their integers (days, microseconds), so
``infinity`` and BC years, which Python's ``datetime`` cannot hold, are printed too.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pyarrow as pa

__all__ = ["NULL", "pg_rows"]

NULL = "<NULL>"  # psql -P null=<NULL>
_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1
_DAY_US = 86_400_000_000


def _civil(days: int) -> tuple[int, int, int]:
    """(year, month, day), proleptic Gregorian, astronomical years (0 is 1 BC): H. Hinnant's."""
    z = days + 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (month <= 2), month, day


def _date(days: int) -> tuple[str, bool]:
    year, month, day = _civil(days)
    bc = year <= 0
    return f"{(1 - year) if bc else year:04d}-{month:02d}-{day:02d}", bc


def _clock(micros: int) -> str:
    seconds, frac = divmod(micros, 1_000_000)
    hours, rest = divmod(seconds, 3600)
    text = f"{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"
    return text + (f".{frac:06d}".rstrip("0") if frac else "")


def _infinite(value: int, top: int) -> str | None:
    return "infinity" if value == top else "-infinity" if value == -top else None


def date_text(days: int) -> str:
    special = _infinite(days, _INT32_MAX)
    if special:
        return special
    text, bc = _date(days)
    return text + (" BC" if bc else "")


def timestamp_text(micros: int, *, tz: bool) -> str:
    special = _infinite(micros, _INT64_MAX)
    if special:
        return special
    days, rest = divmod(micros, _DAY_US)
    text, bc = _date(days)
    return f"{text} {_clock(rest)}" + ("+00" if tz else "") + (" BC" if bc else "")


def _trunc_div(a: int, b: int) -> tuple[int, int]:
    """C's division: the quotient rounds toward zero, the remainder has the dividend's sign."""
    q = abs(a) // b * (1 if a >= 0 else -1)
    return q, a - q * b


def interval_text(months: int, days: int, micros: int) -> str:
    """``EncodeInterval`` in IntervalStyle ``postgres``."""
    years, mons = _trunc_div(months, 12)
    parts: list[str] = []
    before = False
    for value, unit in ((years, "year"), (mons, "mon"), (days, "day")):
        if value:
            sign = "+" if before and value > 0 else ""
            parts.append(f"{sign}{value} {unit}{'' if value == 1 else 's'}")
            before = value < 0
    if not parts or micros:
        sign = "-" if micros < 0 else "+" if before else ""
        parts.append(sign + _clock(abs(micros)))
    return " ".join(parts)


def float_text(value: float, *, single: bool) -> str:
    """``float4out``/``float8out``: shortest digits that read back, exponent form past 10^15
    (10^6 for real) or below 10^-4."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    for digits in range(17):
        mantissa = f"{value:.{digits}e}"
        back = float(mantissa)
        if single:
            back = struct.unpack("f", struct.pack("f", back))[0]
        if back == value:
            break
    head, _, tail = mantissa.partition("e")
    exponent = int(tail)
    if exponent < -4 or exponent >= (6 if single else 15):
        head = head.rstrip("0").rstrip(".") if "." in head else head
        return f"{head}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
    return f"{value:.{max(0, digits - exponent)}f}"


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
        return float_text(value, single=False)
    if isinstance(value, bytes):
        return "\\x" + value.hex()
    if isinstance(value, list):
        return "{" + ",".join(_element(v) for v in value) + "}"
    if isinstance(value, Decimal | int | str):
        return str(value)
    raise TypeError(f"no PostgreSQL text for {value!r}")


def _column(column: pa.ChunkedArray) -> list[str]:
    kind = column.type
    integers: Callable[[int], str] | None = None
    if pa.types.is_date32(kind):
        integers = date_text
    elif pa.types.is_timestamp(kind):
        tz = kind.tz is not None
        integers = lambda v: timestamp_text(v, tz=tz)  # noqa: E731
    elif pa.types.is_time64(kind):
        integers = _clock
    if integers is not None:
        raw = column.cast(pa.int32() if pa.types.is_date32(kind) else pa.int64())
        return [NULL if v is None else integers(v) for v in raw.to_pylist()]
    if pa.types.is_interval(kind):
        return [
            NULL if v is None else interval_text(v.months, v.days, v.nanoseconds // 1000)
            for v in column.to_pylist()
        ]
    if pa.types.is_float32(kind):
        return [NULL if v is None else float_text(v, single=True) for v in column.to_pylist()]
    return [NULL if v is None else _scalar(v) for v in column.to_pylist()]


def pg_rows(table: pa.Table) -> list[tuple[str, ...]]:
    """Each row as the strings ``psql -At -P null=<NULL>`` prints for its fields."""
    columns = [_column(table.column(i)) for i in range(table.num_columns)]
    return list(zip(*columns, strict=True))
